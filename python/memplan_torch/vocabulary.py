"""ATen op names -> memplan's op vocabulary, and the work an op does.

memplan's planners recognise ops by the types the model zoo writes
(include/memplan/model/builder.hpp): vDNN swaps the inputs of `conv2d`,
SuperNeurons recomputes the cheap layers (`relu`, `batch_norm`, pools, ...).
The exporter writes these names so that every planner sees a PyTorch graph as
it sees a zoo model; the ATen name stays in each op's `aten` field.
docs/formats.md has the table.
"""


# Forward ops; their backward ops are named `<type>_backward`, as the zoo does.
FORWARD_TYPES = {
    "convolution": "conv2d", "_convolution": "conv2d", "mkldnn_convolution": "conv2d",
    "native_batch_norm": "batch_norm", "_native_batch_norm_legit": "batch_norm",
    "relu": "relu", "relu_": "relu", "threshold": "relu", "threshold_": "relu",
    "hardtanh": "relu6", "hardtanh_": "relu6",
    "max_pool2d_with_indices": "max_pool",
    "avg_pool2d": "avg_pool", "_adaptive_avg_pool2d": "avg_pool", "adaptive_avg_pool2d": "avg_pool",
    "mean": "avg_pool",
    "addmm": "linear", "mm": "matmul", "bmm": "matmul", "baddbmm": "matmul",
    "cat": "concat", "add": "add", "add_": "add",
    "native_dropout": "dropout",
    "native_layer_norm": "layer_norm",
    "gelu": "gelu", "tanh": "tanh", "_softmax": "softmax", "_log_softmax": "log_softmax",
    "nll_loss_forward": "cross_entropy", "embedding": "embedding",
}

BACKWARD_TYPES = {
    "convolution_backward": "conv2d_backward",
    "native_batch_norm_backward": "batch_norm_backward",
    "threshold_backward": "relu_backward",
    "hardtanh_backward": "relu6_backward",
    "max_pool2d_with_indices_backward": "max_pool_backward",
    "avg_pool2d_backward": "avg_pool_backward", "_adaptive_avg_pool2d_backward": "avg_pool_backward",
    "native_dropout_backward": "dropout_backward",
    "native_layer_norm_backward": "layer_norm_backward",
    "gelu_backward": "gelu_backward", "tanh_backward": "tanh_backward",
    "_softmax_backward_data": "softmax_backward", "_log_softmax_backward_data": "log_softmax_backward",
    "nll_loss_backward": "cross_entropy_backward", "embedding_dense_backward": "embedding_backward",
}

# Ops that draw random numbers: running them again gives other numbers, so
# they are not recomputable (as the zoo's dropout; builder.hpp).
RANDOM = {"native_dropout", "bernoulli", "bernoulli_", "rand", "randn", "rand_like", "randn_like",
          "normal_", "uniform_", "randint", "randperm", "dropout"}

# Ops that treat samples independently: their outputs may be split along dim 0.
BATCH_SPLITTABLE = {"convolution", "relu", "relu_", "threshold_backward", "hardtanh", "hardtanh_",
                    "hardtanh_backward", "max_pool2d_with_indices", "max_pool2d_with_indices_backward",
                    "addmm", "gelu", "gelu_backward", "tanh", "tanh_backward"}

# Matrix-unit ops: memplan's roofline uses its GEMM efficiency for them.
GEMM = {"convolution", "_convolution", "mkldnn_convolution", "convolution_backward", "addmm", "mm", "bmm",
        "baddbmm"}


def memplan_type(aten_name, phase):
    """The memplan op type of an ATen op; unknown ops keep their ATen name.
    Update-phase ops are the optimizer's (`sgd_momentum`, `adam` in the zoo):
    they keep the ATen name of their arithmetic (`add_`, `mul_`)."""
    if phase == "update":
        return aten_name
    return FORWARD_TYPES.get(aten_name) or BACKWARD_TYPES.get(aten_name) or aten_name


def _numel(t):
    return t.numel() if hasattr(t, "numel") else 0


def _gemm_flops(m, k, n):
    return 2.0 * m * k * n


def flops(aten_name, args, outputs):
    """Floating-point operations of one ATen op: 2 per multiply-add for
    convolutions and matrix products, one per output element otherwise (the
    memory-bound ops, whose roofline time is their bytes)."""
    if aten_name in ("convolution", "_convolution", "mkldnn_convolution"):
        out, weight = outputs[0], args[1]
        return 2.0 * _numel(out) * (_numel(weight) / weight.shape[0])
    if aten_name == "convolution_backward":
        grad_out, weight, mask = args[0], args[2], args[-1]
        per_product = 2.0 * _numel(grad_out) * (_numel(weight) / weight.shape[0])
        return per_product * (int(bool(mask[0])) + int(bool(mask[1])))
    if aten_name == "addmm":
        a, b = args[1], args[2]
        return _gemm_flops(a.shape[0], a.shape[1], b.shape[1])
    if aten_name == "mm":
        a, b = args[0], args[1]
        return _gemm_flops(a.shape[0], a.shape[1], b.shape[1])
    if aten_name in ("bmm", "baddbmm"):
        a, b = (args[0], args[1]) if aten_name == "bmm" else (args[1], args[2])
        return a.shape[0] * _gemm_flops(a.shape[1], a.shape[2], b.shape[2])
    return float(sum(_numel(t) for t in outputs)) or float(max((_numel(t) for t in args), default=0))


def bytes_moved(tensors):
    """Device-memory traffic: every tensor the op reads or writes, once."""
    return float(sum(t.numel() * t.element_size() for t in tensors))


def math_mode(dtype_name):
    """memplan's math mode for an activation dtype."""
    return "half" if dtype_name in ("float16", "bfloat16") else "fp32"


