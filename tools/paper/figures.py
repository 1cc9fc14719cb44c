"""The papers' own numbers, printed beside ours (../shared/papers/)."""

# Capuchin (ASPLOS'20) Table 2: largest batch on a P100, TensorFlow / vDNN / OpenAI / Capuchin.
CAPUCHIN_TABLE2 = {
    "vgg16": "228 / 272 / 260 / 350",
    "resnet50": "190 / 520 / 540 / 1,014",
    "resnet152": "86 / 330 / 440 / 798",
    "inception_v3": "160 / 400 / 400 / 716",
    "inception_v4": "88 / 220 / 220 / 468",
    "bert-base": "64 / - / 210 / 450",
}
CAPUCHIN_SWAP_LIMIT = 0.03  # §6.3.2: overhead within 3 % at 1.2x the unplanned batch

# DELTA Tables III-IV: largest batch on one A100 (80 GB), baseline / DTR / DELTA.
DELTA_MAX_BATCH = {
    "resnet50": {"none": "891", "dtr": "1,072", "delta": "1,814"},
    "resnet101": {"none": "594", "dtr": "761", "delta": "1,336"},
}
# DELTA §5.2: ResNet-50 at batch 256 runs in 8.4 GB, a 60.56 % saving.
DELTA_SAVING = "8.4 GB, 60.56 % saved"

# DTR's simulator (h_DTR^eq) on its logs: slowdown at budget ratios 0.3 / 0.5 / 0.7 / 0.9,
# for the rows the corpus README gives.
DTR_SIM = {
    "resnet32": (1.179, 1.107, 1.046, 1.013),
    "transformer": (1.124, 1.058, 1.031, 1.009),
}

# TSPLIT Table IV (largest batch, titan-rtx 24 GB) and Table V (largest width at batch 16):
# Base / vDNN-conv / vDNN-all / Checkpoints / SuperNeurons / TSPLIT.
TSPLIT_TABLE4 = {
    "vgg16": "67 / 176 / 413 / 316 / 462 / 661",
    "vgg19": "61 / 164 / 411 / 293 / 441 / 661",
    "resnet50": "76 / 201 / 783 / 192 / 591 / 1278",
    "resnet101": "51 / 138 / 783 / 124 / 361 / 1096",
    "inception_v4": "36 / 131 / 864 / 220 / 882 / 1372",
    "transformer": "62 / x / 452 / 117 / x / 730",
}
TSPLIT_TABLE5 = {
    "vgg16": "4 / 10 / 25 / 19 / 28 / 40",
    "vgg19": "3 / 10 / 25 / 18 / 27 / 40",
    "resnet50": "4 / 12 / 48 / 12 / 36 / 79",
    "resnet101": "3 / 8 / 48 / 7 / 22 / 68",
    "inception_v4": "2 / 8 / 54 / 13 / 55 / 23",
    "transformer": "3 / x / 18 / 5 / x / 30",
}
# TSPLIT Fig. 14a: TSPLIT over SuperNeurons and over TSPLIT without split, largest batch under a
# throughput limit (ResNet-101).
TSPLIT_FIG14A = {"over superneurons": "2.23x", "over tsplit-nosplit": "1.38x"}

# HOME Table 2: largest batch Capuchin / HOME; throughput Capuchin / HOME (CIFAR-10, RTX 2080 Ti).
HOME_TABLE2 = {
    "mobilenet": "3,954 / 4,200; 2,999 / 3,426",
    "plain20": "2,843 / 2,926; 2,012 / 2,554",
    "squeezenet": "4,056 / 4,347; 5,719 / 6,613",
    "vgg16": "4,250 / 5,125; 5,120 / 6,211",
    "resnet50": "2,014 / 2,576; 2,179 / 2,519",
    "inception_v3": "345 / 365; 240 / 280",
}

# HOME Table 3: evaluator time per evaluation (ms) and full search time (s).
HOME_TABLE3 = {
    "mobilenet": (1.7, 28),
    "plain20": (2.2, 41),
    "squeezenet": (0.5, 9),
    "vgg16": (1.4, 25),
    "resnet50": (0.6, 10),
    "inception_v3": (21.8, 350),
}
