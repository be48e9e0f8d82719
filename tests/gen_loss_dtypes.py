"""PyTorch 2.15's result dtype (or error) of F.mse_loss, l1_loss,
smooth_l1_loss (beta 1 and 0), huber_loss, binary_cross_entropy and
binary_cross_entropy_with_logits for every pair of input / target dtype
(f32, f64, bf16, i64, bool), a [2] or 0-d target, and each reduction,
with the loss's values where it succeeds.

    bench/.venv/bin/python tests/gen_loss_dtypes.py > tests/nn_data/loss_dtypes.json
"""
import json, warnings
import torch
import torch.nn.functional as F

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16,
          "int64": torch.int64, "bool": torch.bool}
LOSSES = {
    "mse": lambda x, t, r: F.mse_loss(x, t, reduction=r),
    "l1": lambda x, t, r: F.l1_loss(x, t, reduction=r),
    "smooth_l1": lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=1.0),
    "smooth_l1_beta0": lambda x, t, r: F.smooth_l1_loss(x, t, reduction=r, beta=0.0),
    "huber": lambda x, t, r: F.huber_loss(x, t, reduction=r, delta=1.0),
    "bce": lambda x, t, r: F.binary_cross_entropy(x, t, reduction=r),
    "bce_logits": lambda x, t, r: F.binary_cross_entropy_with_logits(x, t, reduction=r),
}
X = [0.25, 1.0]
T = {"full": [1.0, 0.0], "0d": 1.0}
cases = []
for loss, fn in LOSSES.items():
    for xn, xd in DTYPES.items():
        for tn, td in DTYPES.items():
            for shape, tv in T.items():
                for red in ["none", "sum", "mean"]:
                    xv = X if xd.is_floating_point else [0, 1]
                    x = torch.tensor(xv, dtype=xd)
                    t = torch.tensor(tv, dtype=td)
                    case = {"loss": loss, "x": xn, "xv": xv, "t": tn, "tv": tv, "reduction": red}
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            y = fn(x, t, red)
                        case["dtype"] = str(y.dtype).replace("torch.", "")
                        case["values"] = y.double().reshape(-1).tolist()
                    except Exception as e:
                        case["error"] = str(e).split("\n")[0]
                    cases.append(case)
print(json.dumps({"torch": torch.__version__, "cases": cases}))
