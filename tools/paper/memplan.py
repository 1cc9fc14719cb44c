"""Runs the memplan CLI and records the commands a table was made with."""
import json
import pathlib
import subprocess


class Memplan:
    """The CLI at `path`; `commands` lists each distinct command line run, as a reader would type it."""

    def __init__(self, path, cwd):
        self.path = path
        self.build = pathlib.Path(path).resolve().parents[2]  # BUILD/examples/cli/memplan
        self.cwd = cwd
        self.commands = []

    def run(self, *args, allowed=(0, 2)):
        """Runs `memplan ARGS`; exit codes outside `allowed` raise with the command's stderr."""
        args = [str(a) for a in args]
        line = "memplan " + " ".join(a for a in args if a != "--json")
        if line not in self.commands:
            self.commands.append(line)
        done = subprocess.run([self.path, *args], capture_output=True, text=True, cwd=self.cwd)
        if done.returncode not in allowed:
            raise RuntimeError(f"memplan {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
        return done

    def json(self, *args):
        return json.loads(self.run(*args, "--json").stdout)

    def rows(self, *args):
        """The `rows` of a JSON answer (compare, maxbatch), by planner."""
        return {r["planner"]: r for r in self.json(*args)["rows"]}
