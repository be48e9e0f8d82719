//! Every differentiable operator of the registry has a gradcheck case
//! (central finite differences in f64), most a gradgradcheck too; the test
//! fails when an operator marked differentiable has none.

use ferrotorch::autograd::{GradcheckOptions, gradcheck, gradgradcheck};
use ferrotorch::backend::dispatch::{call1, registered_ops};
use ferrotorch::ops::activation_backward::{ActivationBackward, ActivationKind};
use ferrotorch::ops::unary::ThresholdBackward;
use ferrotorch::ops::{Cast, ToDevice, ViewKind, ViewScatter};
use ferrotorch::{DType, Device, Generator, Result, Tensor, TensorOptions};

type F = Box<dyn Fn(&[Tensor]) -> Result<Tensor>>;

struct Case {
    op: &'static str,
    f: F,
    inputs: Vec<Tensor>,
    second_order: bool,
}

fn rand(g: &Generator, shape: &[usize], lo: f64, hi: f64) -> Tensor {
    TensorOptions::new()
        .dtype(DType::F64)
        .generator(g)
        .uniform(shape, lo, hi)
        .unwrap()
        .requires_grad_(true)
        .unwrap()
}

fn case(
    op: &'static str,
    inputs: Vec<Tensor>,
    second_order: bool,
    f: impl Fn(&[Tensor]) -> Result<Tensor> + 'static,
) -> Case {
    Case {
        op,
        f: Box::new(f),
        inputs,
        second_order,
    }
}

fn cases() -> Vec<Case> {
    let g = Generator::new(42);
    let x = || rand(&g, &[3, 4], -2.0, 2.0);
    let sq = || rand(&g, &[3, 3], -1.0, 1.0);
    let probs = || rand(&g, &[3, 4], 0.1, 0.9);
    // Well-conditioned and symmetric positive-definite matrices made from `a`.
    fn well(a: &Tensor) -> Result<Tensor> {
        a.add(&Tensor::eye(3)?.to_dtype(DType::F64)?.mul(3.0)?)
    }
    fn spd(a: &Tensor) -> Result<Tensor> {
        a.matmul(&a.mt()?)?.add(&Tensor::eye(3)?.to_dtype(DType::F64)?)
    }
    let pos = || rand(&g, &[3, 4], 0.5, 2.0);
    let v = |n: usize| rand(&g, &[n], -1.0, 1.0);
    let idx = |v: Vec<i64>, shape: &[usize]| Tensor::from_vec(v, shape).unwrap();
    let mut c = vec![
        case("neg", vec![x()], true, |t| t[0].neg()),
        case("abs", vec![pos()], true, |t| t[0].neg()?.abs()),
        case("exp", vec![x()], true, |t| t[0].exp()),
        case("log", vec![pos()], true, |t| t[0].log()),
        case("log1p", vec![pos()], true, |t| t[0].log1p()),
        case("expm1", vec![x()], true, |t| t[0].expm1()),
        case("sqrt", vec![pos()], true, |t| t[0].sqrt()),
        case("rsqrt", vec![pos()], true, |t| t[0].rsqrt()),
        case("reciprocal", vec![pos()], true, |t| t[0].reciprocal()),
        case("sin", vec![x()], true, |t| t[0].sin()),
        case("cos", vec![x()], true, |t| t[0].cos()),
        case("tanh", vec![x()], true, |t| t[0].tanh()),
        case("sigmoid", vec![x()], true, |t| t[0].sigmoid()),
        case("erf", vec![x()], true, |t| t[0].erf()),
        case("erfinv", vec![probs()], true, |t| t[0].mul(2.0)?.sub(1.0)?.erfinv()),
        case("relu", vec![x()], true, |t| t[0].relu()),
        case("gelu", vec![x()], true, |t| t[0].gelu()),
        case("ferrotorch::gelu_tanh", vec![x()], true, |t| t[0].gelu_tanh()),
        case("silu", vec![x()], true, |t| t[0].silu()),
        case("floor", vec![x()], false, |t| t[0].mul(1.7)?.floor()),
        case("ceil", vec![x()], false, |t| t[0].mul(1.7)?.ceil()),
        case("round", vec![x()], false, |t| t[0].mul(1.7)?.round()),
        case("trunc", vec![x()], false, |t| t[0].mul(1.7)?.trunc()),
        case("sign", vec![x()], false, |t| t[0].sign()),
        case("pow.Tensor_Scalar", vec![pos()], true, |t| t[0].pow(2.5)),
        case("clamp", vec![x()], true, |t| t[0].clamp(Some(-1.0), Some(1.0))),
        case("softplus", vec![x()], true, |t| t[0].mul(8.0)?.softplus(1.5, 10.0)),
        case("threshold_backward", vec![x(), x()], false, |t| {
            call1(&ThresholdBackward, &[&t[0], &t[1]])
        }),
        case("tanh_backward", vec![x(), x()], true, |t| {
            call1(&ActivationBackward(ActivationKind::Tanh), &[&t[0], &t[1]])
        }),
        case("sigmoid_backward", vec![x(), x()], true, |t| {
            call1(&ActivationBackward(ActivationKind::Sigmoid), &[&t[0], &t[1]])
        }),
        case("ferrotorch::sin_backward", vec![x(), x()], true, |t| {
            call1(&ActivationBackward(ActivationKind::Sin), &[&t[0], &t[1]])
        }),
        case("ferrotorch::cos_backward", vec![x(), x()], true, |t| {
            call1(&ActivationBackward(ActivationKind::Cos), &[&t[0], &t[1]])
        }),
        case("ferrotorch::square_backward", vec![x(), x()], true, |t| {
            call1(&ActivationBackward(ActivationKind::Square), &[&t[0], &t[1]])
        }),
        case("add.Tensor", vec![x(), v(4)], true, |t| t[0].add_scaled(&t[1], 2.0)),
        case("sub.Tensor", vec![x(), v(4)], true, |t| t[0].sub_scaled(&t[1], 0.5)),
        case("mul.Tensor", vec![x(), v(4)], true, |t| t[0].mul(&t[1])),
        case("div.Tensor_mode", vec![x(), rand(&g, &[3, 1], 0.5, 2.0)], true, |t| {
            t[0].div(&t[1])
        }),
        case("pow.Tensor_Tensor", vec![pos(), x()], true, |t| t[0].pow(&t[1])),
        case("maximum", vec![x(), x()], true, |t| t[0].maximum(&t[1])),
        case("minimum", vec![x(), x()], true, |t| t[0].minimum(&t[1])),
        case("atan2", vec![x(), v(4)], true, |t| t[0].atan2(&t[1])),
        case("hypot", vec![x(), v(4)], true, |t| t[0].hypot(&t[1])),
        case("logaddexp", vec![x(), v(4)], true, |t| t[0].logaddexp(&t[1])),
        case("logaddexp2", vec![x(), v(4)], true, |t| t[0].logaddexp2(&t[1])),
        case("copysign.Tensor", vec![pos(), v(4)], true, |t| t[0].copysign(&t[1])),
        case(
            "remainder.Tensor",
            vec![rand(&g, &[3, 4], -3.5, -3.3), rand(&g, &[4], 1.5, 1.6)],
            true,
            |t| t[0].remainder(&t[1]),
        ),
        case(
            "fmod.Tensor",
            vec![rand(&g, &[3, 4], -3.5, -3.3), rand(&g, &[3, 1], 1.5, 1.6)],
            true,
            |t| t[0].fmod(&t[1]),
        ),
        case(
            "clamp.Tensor",
            vec![x(), rand(&g, &[4], -1.0, 0.0), rand(&g, &[3, 1], 0.0, 1.0)],
            true,
            |t| t[0].clamp(Some(&t[1]), Some(&t[2])),
        ),
        case("clamp.Tensor", vec![x(), v(4)], true, |t| t[0].clamp_min(&t[1])),
        case("clamp.Tensor", vec![x(), v(4)], true, |t| {
            t[0].clamp(None::<f64>, Some(&t[1]))
        }),
        case("lerp.Scalar", vec![x(), v(4)], true, |t| t[0].lerp(&t[1], 0.7)),
        case(
            "lerp.Tensor",
            vec![x(), v(4), rand(&g, &[3, 1], -0.2, 1.2)],
            true,
            |t| t[0].lerp(&t[1], &t[2]),
        ),
        case("nan_to_num", vec![x()], true, |t| t[0].nan_to_num(0.0, None, None)),
        case("kthvalue", vec![x()], true, |t| Ok(t[0].kthvalue(2, 1, false)?.0)),
        case("median.dim", vec![x()], true, |t| Ok(t[0].median_dim(0, true)?.0)),
        case("nanmedian.dim", vec![x()], true, |t| {
            Ok(t[0].nanmedian_dim(1, false)?.0)
        }),
        case("mode", vec![x()], true, |t| Ok(t[0].mode(1, false)?.0)),
        case("median", vec![x()], true, |t| t[0].median()),
        case("nansum", vec![x()], true, |t| t[0].nansum_dim(1, true)),
        case("roll", vec![x()], true, |t| t[0].roll((1, -3), (0, 1))),
        case("diag_embed", vec![x()], true, |t| t[0].diag_embed(1, 0, 2)),
        case("trace", vec![x()], true, |t| t[0].trace()),
        case("block_diag", vec![x(), v(4)], true, |t| {
            Tensor::block_diag(&[&t[0], &t[1]])
        }),
        case("masked_select", vec![x()], true, |t| {
            t[0].masked_select(&Tensor::new([true, false, true, true]).unwrap())
        }),
        case("masked_scatter", vec![x(), rand(&g, &[8], -1.0, 1.0)], true, |t| {
            t[0].masked_scatter(&Tensor::new([false, true, true, false]).unwrap(), &t[1])
        }),
        case("take", vec![x()], true, |t| {
            t[0].take(&Tensor::new([[0i64, -1], [5, 5]])?)
        }),
        case("index_add", vec![x(), rand(&g, &[4, 4], -1.0, 1.0)], true, |t| {
            t[0].index_add(0, &Tensor::new([2i64, 0, 2, 1])?, &t[1], 0.5)
        }),
        case("index_copy", vec![x(), rand(&g, &[3, 2], -1.0, 1.0)], true, |t| {
            t[0].index_copy(1, &Tensor::new([3i64, 0])?, &t[1])
        }),
        case("index_fill.int_Scalar", vec![x()], true, |t| {
            t[0].index_fill(1, &Tensor::new([1i64, -1])?, 2.0)
        }),
        case("diagonal", vec![x()], true, |t| t[0].diagonal(1, 0, 1)),
        case("unfold", vec![x()], true, |t| t[0].unfold(1, 3, 1)),
        case("nansum", vec![x()], true, |t| t[0].nansum()),
        case("aminmax", vec![x()], true, |t| {
            let (lo, hi) = t[0].aminmax(Some(1), false)?;
            lo.mul(2.0)?.add(&hi)
        }),
        case("aminmax", vec![x()], true, |t| Ok(t[0].aminmax(None, true)?.1)),
        case("linalg_inv_ex", vec![sq()], true, |t| well(&t[0])?.linalg_inv()),
        case("_linalg_solve_ex", vec![sq(), x()], true, |t| {
            well(&t[0])?.linalg_solve(&t[1])
        }),
        case("_linalg_det", vec![sq()], true, |t| well(&t[0])?.linalg_det()),
        case("_linalg_slogdet", vec![sq()], true, |t| {
            Ok(well(&t[0])?.linalg_slogdet()?.1)
        }),
        case("linalg_cholesky_ex", vec![sq()], true, |t| {
            spd(&t[0])?.linalg_cholesky(false)
        }),
        case("linalg_qr", vec![x().mt().unwrap()], true, |t| {
            let (q, r) = t[0].linalg_qr("reduced")?;
            q.matmul(&r.mul(&r)?)
        }),
        case("linalg_qr", vec![x()], true, |t| {
            // Wide: A = Q [R1 | R2].
            let (q, r) = t[0].linalg_qr("reduced")?;
            q.matmul(&r.mul(&r)?)
        }),
        case("linalg_qr", vec![rand(&g, &[3, 3], -1.0, 1.0)], true, |t| {
            let (q, r) = t[0].linalg_qr("complete")?;
            q.add(&r)
        }),
        case(
            "_linalg_solve_ex",
            vec![rand(&g, &[2, 1, 3, 3], -1.0, 1.0), v(3)],
            true,
            |t| well(&t[0])?.linalg_solve(&t[1]),
        ),
        case("_linalg_eigh", vec![sq()], true, |t| {
            let (l, v) = t[0].add(&t[0].mt()?)?.linalg_eigh("L")?;
            v.mul(&l.mul(&l)?.unsqueeze(0)?)?.matmul(&v.mt()?)?.add(&l)
        }),
        case("_linalg_svd", vec![x()], true, |t| {
            let (u, s, vh) = t[0].linalg_svd(false)?;
            u.mul(&s.mul(&s)?.unsqueeze(0)?)?.matmul(&vh)?.add(&s.sum()?)
        }),
        case(
            "addmm",
            vec![rand(&g, &[3, 1], -1.0, 1.0), x(), rand(&g, &[4, 2], -1.0, 1.0)],
            true,
            |t| t[0].addmm(&t[1], &t[2], 0.5, -2.0),
        ),
        case("addmv", vec![v(3), x(), v(4)], true, |t| {
            t[0].addmv(&t[1], &t[2], 1.5, 0.5)
        }),
        case(
            "addbmm",
            vec![v(2), rand(&g, &[2, 3, 4], -1.0, 1.0), rand(&g, &[2, 4, 2], -1.0, 1.0)],
            true,
            |t| t[0].addbmm(&t[1], &t[2], -1.0, 2.0),
        ),
        case(
            "baddbmm",
            vec![
                rand(&g, &[3, 1], -1.0, 1.0),
                rand(&g, &[2, 3, 4], -1.0, 1.0),
                rand(&g, &[2, 4, 2], -1.0, 1.0),
            ],
            true,
            |t| t[0].baddbmm(&t[1], &t[2], 2.0, 1.0),
        ),
        case(
            "linalg_cross",
            vec![rand(&g, &[2, 3], -1.0, 1.0), rand(&g, &[1, 3], -1.0, 1.0)],
            true,
            |t| t[0].linalg_cross(&t[1], -1),
        ),
        case("cummax", vec![x()], true, |t| Ok(t[0].cummax(1)?.0)),
        case("cummin", vec![x()], true, |t| Ok(t[0].cummin(0)?.0)),
        case("logcumsumexp", vec![x()], true, |t| t[0].logcumsumexp(1)),
        case("nanmedian", vec![x()], true, |t| t[0].nanmedian()),
        case("where.self", vec![x(), v(4)], true, |t| {
            t[1].where_cond(&Tensor::new([true, false, false, true]).unwrap(), &t[0])
        }),
        case("sum.dim_IntList", vec![x()], true, |t| t[0].sum_dim(1, false)),
        case("prod.dim_int", vec![pos()], true, |t| t[0].prod_dim(0, true)),
        case("mean.dim", vec![x()], true, |t| t[0].mean_dim(1, false)),
        case("mean.dim", vec![x()], true, |t| t[0].mean()),
        case("var.correction", vec![x()], true, |t| t[0].var_dim(vec![0], 1.0, false)),
        case("var.correction", vec![x()], true, |t| t[0].var(0.0)),
        case("std.correction", vec![x()], true, |t| t[0].std_dim(vec![1], 1.0, true)),
        case("std.correction", vec![x()], true, |t| t[0].std(1.0)),
        case("var_mean.correction", vec![x()], true, |t| {
            let (v, m) = t[0].var_mean_dim([1], 1.0, false)?;
            v.add(&m.mul(3.0)?)
        }),
        case("std_mean.correction", vec![x()], true, |t| {
            let (s, m) = t[0].std_mean(0.0)?;
            s.mul(2.0)?.sub(&m)
        }),
        // A draw's parameters get PyTorch's zero gradient; a fixed seed
        // makes the draw a step function of p, flat near these points.
        case("ferrotorch::random_sample", vec![probs()], false, |t| {
            t[0].bernoulli_with(&ferrotorch::Generator::new(3))?.mul(&t[0])
        }),
        case("linalg_vector_norm", vec![x()], true, |t| t[0].norm(2.0)),
        case("linalg_vector_norm", vec![x()], true, |t| {
            t[0].norm_dim(3.0, vec![1], false)
        }),
        case("linalg_vector_norm", vec![x()], true, |t| {
            t[0].norm_dim(1.5, vec![0], true)
        }),
        case("linalg_vector_norm", vec![x()], true, |t| t[0].norm_dim(0.5, (), false)),
        case("linalg_vector_norm", vec![x()], false, |t| {
            t[0].norm_dim(f64::INFINITY, vec![1], false)
        }),
        case("linalg_vector_norm", vec![x()], true, |t| t[0].norm(1.0)),
        case("logsumexp", vec![x()], true, |t| t[0].logsumexp(1, false)),
        case("logsumexp", vec![x()], true, |t| t[0].logsumexp([0, 1], true)),
        case("amax", vec![x()], false, |t| t[0].amax(1, false)),
        case("amin", vec![x()], false, |t| t[0].amin(0, true)),
        case("max.dim", vec![x()], false, |t| Ok(t[0].max_dim(1, false)?.0)),
        case("min.dim", vec![x()], false, |t| Ok(t[0].min_dim(0, true)?.0)),
        case("cumsum", vec![x()], true, |t| t[0].cumsum(1)),
        case("cumprod", vec![pos()], true, |t| t[0].cumprod(0)),
        case("_softmax", vec![x()], true, |t| t[0].softmax(1)),
        case("_log_softmax", vec![x()], true, |t| t[0].log_softmax(0)),
        case("mm", vec![x(), rand(&g, &[4, 2], -1.0, 1.0)], true, |t| t[0].mm(&t[1])),
        case(
            "bmm",
            vec![rand(&g, &[2, 3, 4], -1.0, 1.0), rand(&g, &[2, 4, 2], -1.0, 1.0)],
            true,
            |t| t[0].bmm(&t[1]),
        ),
        case("view", vec![x()], true, |t| t[0].view([4, 3])),
        case("t", vec![x()], true, |t| t[0].t()),
        case("masked_fill.Scalar", vec![x()], true, |t| {
            t[0].masked_fill(&Tensor::new([true, false, false, true]).unwrap(), 2.5)
        }),
        case("tril", vec![x()], true, |t| t[0].tril(1)),
        case("triu", vec![x()], true, |t| t[0].triu(-1)),
        case("dot", vec![v(4), v(4)], true, |t| t[0].dot(&t[1])),
        case("mv", vec![x(), v(4)], true, |t| t[0].mv(&t[1])),
        case("stack", vec![x(), x(), x()], true, |t| {
            Tensor::stack(&[&t[0], &t[1], &t[2]], 1)
        }),
        case("t", vec![v(3)], true, |t| t[0].t()),
        case("permute", vec![rand(&g, &[2, 3, 2], -1.0, 1.0)], true, |t| {
            t[0].permute([2, 0, 1])
        }),
        case("transpose.int", vec![x()], true, |t| t[0].transpose(0, 1)),
        case("expand", vec![v(4)], true, |t| t[0].expand([3, 4])),
        case("slice.Tensor", vec![x()], true, |t| t[0].slice(1, Some(1), None, 2)),
        case("narrow", vec![x()], true, |t| t[0].narrow(0, 1, 2)),
        case("select.int", vec![x()], true, |t| t[0].select(1, -1)),
        case("squeeze.dims", vec![rand(&g, &[3, 1, 2], -1.0, 1.0)], true, |t| {
            t[0].squeeze()
        }),
        case("unsqueeze", vec![x()], true, |t| t[0].unsqueeze(1)),
        case("as_strided", vec![x()], true, |t| t[0].as_strided([2, 2], [4, 1], 1)),
        case("alias", vec![v(4)], true, |t| t[0].t()),
        // A reshape that must copy ends in `_unsafe_view`.
        case("_unsafe_view", vec![x()], true, |t| t[0].t()?.reshape([-1])),
        // A reshape of a non-contiguous tensor that needs no copy.
        case("_reshape_alias", vec![x()], true, |t| {
            t[0].narrow(1, 0, 2)?.reshape([3, 1, 2])
        }),
        // matmul of a vector and a matrix ends in `squeeze_(0)`.
        case("squeeze_.dim", vec![v(3), x()], true, |t| t[0].matmul(&t[1])),
        case(
            "ferrotorch::view_scatter",
            vec![rand(&g, &[3, 2], -1.0, 1.0)],
            true,
            |t| {
                let view = ViewKind::Slice {
                    dim: 1,
                    start: Some(0),
                    end: None,
                    step: 2,
                };
                call1(
                    &ViewScatter {
                        view,
                        input_shape: [3usize, 4].as_slice().into(),
                    },
                    &[&t[0]],
                )
            },
        ),
        // Multi-output views: both outputs used, and outputs without a gradient.
        case("split.Tensor", vec![x()], true, |t| {
            let p = t[0].split(3, 1)?;
            p[1].mul(&p[0].narrow(1, 0, 1)?)
        }),
        case("split_with_sizes", vec![x()], true, |t| {
            t[0].split_sizes([1, 2], 0)?[0].mul(2.0)
        }),
        case("unbind.int", vec![x()], true, |t| {
            let p = t[0].unbind(1)?;
            p[0].mul(&p[2])
        }),
        case("cat", vec![x(), rand(&g, &[3, 2], -1.0, 1.0)], true, |t| {
            Tensor::cat(&[&t[0], &t[1]], 1)
        }),
        case("gather", vec![x()], true, move |t| {
            t[0].gather(1, &idx(vec![0, 3, 3, 1, 2, 0], &[3, 2]))
        }),
        case("scatter.src", vec![x(), rand(&g, &[2, 2], -1.0, 1.0)], true, move |t| {
            t[0].scatter(1, &idx(vec![1, 2, 0, 3], &[2, 2]), &t[1])
        }),
        case("index_put", vec![x(), rand(&g, &[2], -1.0, 1.0)], true, move |t| {
            let rows = Some(idx(vec![1, 0], &[2]));
            let cols = Some(idx(vec![2, 2], &[2]));
            t[0].index_put(&[rows, cols], &t[1], false)
        }),
        case("index_put", vec![x(), rand(&g, &[1], -1.0, 1.0)], true, move |t| {
            // accumulate, a broadcast value, a repeated position.
            t[0].index_put(&[Some(idx(vec![1, 1, 0], &[3]))], &t[1], true)
        }),
        case("scatter_add", vec![x(), rand(&g, &[2, 3], -1.0, 1.0)], true, move |t| {
            t[0].scatter_add(1, &idx(vec![1, 1, 0, 3, 3, 3], &[2, 3]), &t[1])
        }),
        case("index_select", vec![x()], true, move |t| {
            t[0].index_select(0, &idx(vec![2, 0, 2], &[3]))
        }),
        case("index.Tensor", vec![x()], true, move |t| {
            t[0].index(&[Some(idx(vec![0, 2, 2], &[3])), Some(idx(vec![1, -1, 0], &[3]))])
        }),
        case("sort.stable", vec![x()], false, |t| Ok(t[0].sort(1, true)?.0)),
        case("topk", vec![x()], false, |t| Ok(t[0].topk(2, 1, true)?.0)),
        case("_to_copy", vec![x()], true, |t| {
            call1(
                &Cast {
                    dtype: DType::F64,
                    preserve_strides: false,
                    clone: false,
                },
                &[&t[0].t()?],
            )
        }),
        case("ferrotorch::to_device", vec![x()], true, |t| {
            call1(&ToDevice { device: Device::Cpu }, &[&t[0]])
        }),
        case("fill_.Scalar", vec![x()], false, |t| {
            let y = t[0].mul(2.0)?;
            y.narrow(1, 0, 2)?.fill_(0.5)?;
            let z = y.mul(&t[0])?;
            z.narrow(1, 2, 1)?.zero_()?;
            z.exp()
        }),
        case("copy_", vec![x(), x()], false, |t| {
            let y = t[0].mul(2.0)?;
            y.narrow(1, 1, 2)?.copy_(&t[1].narrow(1, 0, 2)?.exp()?)?;
            y.narrow(0, 0, 1)?.copy_(&t[1].narrow(0, 1, 1)?.sum_dim(1, true)?)?;
            y.mul(&t[0])
        }),
        case("full", vec![x()], false, |t| {
            let c = TensorOptions::like(&t[0]).full(t[0].shape(), 1.5)?;
            t[0].mul(&c)
        }),
    ];
    // In-place comparisons: their result is a constant (zero gradient), so
    // `y * x` differentiates to the 0/1 indicator for x and 0 for the other.
    type Cmp = fn(&Tensor, &Tensor) -> Result<Tensor>;
    let comparisons: [(&'static str, Cmp); 6] = [
        ("eq.Tensor", |a, b| a.eq_(b)),
        ("ne.Tensor", |a, b| a.ne_(b)),
        ("lt.Tensor", |a, b| a.lt_(b)),
        ("le.Tensor", |a, b| a.le_(b)),
        ("gt.Tensor", |a, b| a.gt_(b)),
        ("ge.Tensor", |a, b| a.ge_(b)),
    ];
    for (name, cmp) in comparisons {
        c.push(case(name, vec![x(), x()], false, move |t| {
            let y = t[0].mul(1.0)?;
            cmp(&y, &t[1])?;
            y.mul(&t[0])
        }));
    }
    // The product's gradient with a zero in the input (one zero: exact).
    let with_zero = Tensor::new([[0.5f64, 0.0, 2.0], [1.5, -1.0, 0.7]])
        .unwrap()
        .requires_grad_(true)
        .unwrap();
    c.push(case("prod.dim_int", vec![with_zero], false, |t| {
        t[0].prod_dim(1, false)
    }));
    c.extend(conv_pool_cases(&g));
    // Composites built on the ops above (repeat: reshape + expand; flip:
    // index_select).
    c.push(case("repeat", vec![x()], true, |t| t[0].repeat((2, 1, 3))));
    c.push(case("flip", vec![x()], true, |t| t[0].flip((0, -1))));
    c.push(case("diagonal_copy", vec![x()], true, |t| t[0].diag(1)));
    c.push(case("var_mean.correction", vec![x()], true, |t| {
        let (v, m) = t[0].var_mean_dim(1, 1.0, false)?;
        v.add(&m.mul(3.0)?)
    }));
    c.push(case("std_mean.correction", vec![x()], true, |t| {
        let (s, m) = t[0].std_mean_dim((), 0.0, true)?;
        s.mul(2.0)?.add(&m)
    }));
    c.extend(nn_cases(&g));
    c
}

/// The normalisation, embedding, activation and loss operators.
fn nn_cases(g: &Generator) -> Vec<Case> {
    use ferrotorch::Reduction;
    use ferrotorch::ops::activation::{Act, ActivationGrad};
    use ferrotorch::ops::loss::{NllLoss, NllLossBackward};
    use ferrotorch::ops::softmax::SoftmaxBackward;
    let r = |shape: &[usize], lo: f64, hi: f64| rand(g, shape, lo, hi);
    let x = || r(&[3, 4], -2.0, 2.0);
    let mut c = vec![
        case(
            "native_layer_norm",
            vec![r(&[2, 3, 4], -2.0, 2.0), r(&[4], 0.5, 1.5), r(&[4], -1.0, 1.0)],
            true,
            |t| t[0].layer_norm([4], Some(&t[1]), Some(&t[2]), 1e-5),
        ),
        // Fused attention: causal with more queries than keys (rows past the
        // keys see them all), and not causal over two query blocks with Ev != E.
        case(
            "_scaled_dot_product_flash_attention_for_cpu",
            vec![
                r(&[2, 5, 3], -1.5, 1.5),
                r(&[2, 4, 3], -1.5, 1.5),
                r(&[2, 4, 2], -1.0, 1.0),
            ],
            true,
            |t| Ok(t[0].scaled_dot_product_flash_attention(&t[1], &t[2], true, None)?.0),
        ),
        case(
            "_scaled_dot_product_flash_attention_for_cpu",
            vec![
                r(&[1, 34, 2], -1.0, 1.0),
                r(&[1, 3, 2], -1.0, 1.0),
                r(&[1, 3, 3], -1.0, 1.0),
            ],
            false,
            |t| {
                Ok(t[0]
                    .scaled_dot_product_flash_attention(&t[1], &t[2], false, Some(0.7))?
                    .0)
            },
        ),
        // A layer over 3 steps, each direction, with and without b_hh; outputs and final states all used.
        case(
            "ferrotorch::lstm_layer",
            vec![
                r(&[3, 2, 8], -1.5, 1.5),
                r(&[8, 2], -1.0, 1.0),
                r(&[8], -0.5, 0.5),
                r(&[2, 2], -1.0, 1.0),
                r(&[2, 2], -1.0, 1.0),
            ],
            true,
            |t| {
                let (out, h, c) = t[0].lstm_layer(&t[1], Some(&t[2]), &t[3], &t[4], false)?;
                out.sum_dim([0], false)?.add(&h.mul(&c)?)
            },
        ),
        case(
            "ferrotorch::lstm_layer",
            vec![
                r(&[3, 1, 4], -1.5, 1.5),
                r(&[4, 1], -1.0, 1.0),
                r(&[1, 1], -1.0, 1.0),
                r(&[1, 1], -1.0, 1.0),
            ],
            true,
            |t| {
                let (out, _, c) = t[0].lstm_layer(&t[1], None, &t[2], &t[3], true)?;
                out.mul(&out)?.sum()?.add(&c.sum()?)
            },
        ),
        // Both outputs used, then only hy (no gradient reaches cy), then only cy.
        case(
            "_thnn_fused_lstm_cell",
            vec![r(&[3, 8], -2.0, 2.0), r(&[3, 8], -2.0, 2.0), r(&[3, 2], -1.5, 1.5)],
            true,
            |t| {
                let (hy, cy, _) = t[0].fused_lstm_cell(&t[1], &t[2])?;
                hy.add(&cy.mul(&cy)?)
            },
        ),
        case(
            "_thnn_fused_lstm_cell",
            vec![r(&[2, 4], -2.0, 2.0), r(&[2, 4], -2.0, 2.0), r(&[2, 1], -1.5, 1.5)],
            true,
            |t| Ok(t[0].fused_lstm_cell(&t[1], &t[2])?.0),
        ),
        case(
            "_thnn_fused_lstm_cell",
            vec![r(&[2, 4], -2.0, 2.0), r(&[2, 4], -2.0, 2.0), r(&[2, 1], -1.5, 1.5)],
            true,
            |t| Ok(t[0].fused_lstm_cell(&t[1], &t[2])?.1),
        ),
        case("native_layer_norm", vec![r(&[3, 2, 5], -2.0, 2.0)], true, |t| {
            t[0].layer_norm([2, 5], None, None, 1e-3)
        }),
        case(
            "native_group_norm",
            vec![r(&[2, 4, 3], -2.0, 2.0), r(&[4], 0.5, 1.5), r(&[4], -1.0, 1.0)],
            true,
            |t| t[0].group_norm(2, Some(&t[1]), Some(&t[2]), 1e-5),
        ),
        case(
            "native_batch_norm",
            vec![r(&[4, 3, 2], -2.0, 2.0), r(&[3], 0.5, 1.5), r(&[3], -1.0, 1.0)],
            true,
            |t| t[0].batch_norm(None, None, Some(&t[1]), Some(&t[2]), true, 0.1, 1e-5),
        ),
        case(
            "native_batch_norm",
            vec![r(&[4, 3], -2.0, 2.0), r(&[3], 0.5, 1.5)],
            true,
            |t| {
                let rm = Tensor::new([0.1f64, -0.2, 0.3])?;
                let rv = Tensor::new([0.5f64, 1.5, 2.0])?;
                t[0].batch_norm(Some(&rm), Some(&rv), Some(&t[1]), None, false, 0.1, 1e-5)
            },
        ),
        // padding_idx and scale_grad_by_freq change the gradient on purpose.
        case("embedding", vec![r(&[5, 3], -1.0, 1.0)], true, |t| {
            let idx = Tensor::new([[1i64, 3, 3], [0, 4, 1]])?;
            t[0].embedding(&idx, None, false)?.mul(&t[0].sum()?)
        }),
        case("_softmax_backward_data", vec![x(), x()], true, |t| {
            ferrotorch::backend::dispatch::call1(&SoftmaxBackward { dim: 1, log: false }, &[&t[0], &t[1].softmax(1)?])
        }),
        case("_log_softmax_backward_data", vec![x(), x()], true, |t| {
            ferrotorch::backend::dispatch::call1(
                &SoftmaxBackward { dim: 0, log: true },
                &[&t[0], &t[1].log_softmax(0)?],
            )
        }),
        case("nll_loss_forward", vec![x()], true, |t| {
            let target = Tensor::new([1i64, -100, 3])?;
            let w = Tensor::new([0.5f64, 1.0, 1.5, 2.0])?;
            t[0].nll_loss(&target, Some(&w), Reduction::Mean, -100)
        }),
        case("nll_loss_forward", vec![x()], true, |t| {
            t[0].nll_loss(&Tensor::new([1i64, 0, 3])?, None, Reduction::None, -100)
        }),
        case("nll_loss2d_forward", vec![r(&[2, 3, 2, 2], -2.0, 2.0)], true, |t| {
            let target = Tensor::new([[[0i64, 2], [1, 1]], [[2, 0], [1, 2]]])?;
            t[0].nll_loss(&target, None, Reduction::Sum, -100)
        }),
        case("nll_loss_backward", vec![r(&[3], -1.0, 1.0)], true, |t| {
            let op = NllLossBackward {
                loss: NllLoss {
                    reduction: Reduction::None,
                    ignore_index: -100,
                    weight: false,
                    two_d: false,
                },
                input_shape: [3usize, 4].as_slice().into(),
            };
            let total = Tensor::new(1.0f64)?;
            ferrotorch::backend::dispatch::call1(&op, &[&t[0], &Tensor::new([1i64, 0, 3])?, &total])
        }),
        case("nll_loss2d_backward", vec![r(&[], -1.0, 1.0)], true, |t| {
            let op = NllLossBackward {
                loss: NllLoss {
                    reduction: Reduction::Mean,
                    ignore_index: 1,
                    weight: false,
                    two_d: true,
                },
                input_shape: [1usize, 3, 2, 1].as_slice().into(),
            };
            let total = Tensor::new(2.0f64)?;
            let target = Tensor::new([[[0i64], [2]]])?;
            ferrotorch::backend::dispatch::call1(&op, &[&t[0], &target, &total])
        }),
        case("mse_loss", vec![x(), x()], true, |t| {
            t[0].mse_loss(&t[1], Reduction::Mean)
        }),
        case("smooth_l1_loss", vec![x(), x()], true, |t| {
            t[0].smooth_l1_loss(&t[1], Reduction::None, 0.7)
        }),
        case("huber_loss", vec![x(), x()], true, |t| {
            t[0].huber_loss(&t[1], Reduction::Sum, 0.6)
        }),
        case(
            "binary_cross_entropy",
            vec![r(&[3, 4], 0.1, 0.9), r(&[3, 4], 0.0, 1.0)],
            true,
            |t| {
                let w = Tensor::new([0.5f64, 1.0, 1.5, 2.0])?;
                t[0].binary_cross_entropy(&t[1], Some(&w), Reduction::Mean)
            },
        ),
        case(
            "binary_cross_entropy_with_logits",
            vec![x(), r(&[3, 4], 0.0, 1.0)],
            true,
            |t| {
                let pw = Tensor::new([0.5f64, 1.0, 1.5, 2.0])?;
                t[0].binary_cross_entropy_with_logits(&t[1], None, Some(&pw), Reduction::Mean)
            },
        ),
    ];
    let acts = [
        Act::LeakyRelu { slope: 0.1 },
        Act::Elu {
            alpha: 1.3,
            scale: 1.1,
            input_scale: 0.8,
            celu: false,
        },
        Act::Elu {
            alpha: 2.0,
            scale: 1.0,
            input_scale: 0.5,
            celu: true,
        },
        Act::Hardtanh { min: -1.0, max: 1.0 },
        Act::Mish,
        Act::Hardswish,
        Act::Hardsigmoid,
        Act::LogSigmoid,
        Act::Softshrink { lambd: 0.5 },
        Act::Hardshrink { lambd: 0.5 },
        Act::Gelu { tanh: false },
        Act::Gelu { tanh: true },
    ];
    for act in acts {
        let (fwd, bwd): (&'static str, &'static str) = match act {
            Act::LeakyRelu { .. } => ("leaky_relu", "leaky_relu_backward"),
            Act::Elu { celu: false, .. } => ("elu", "elu_backward"),
            Act::Elu { celu: true, .. } => ("celu", "celu_backward"),
            Act::Hardtanh { .. } => ("hardtanh", "hardtanh_backward"),
            Act::Mish => ("mish", "mish_backward"),
            Act::Hardswish => ("hardswish", "hardswish_backward"),
            Act::Hardsigmoid => ("hardsigmoid", "hardsigmoid_backward"),
            Act::LogSigmoid => ("log_sigmoid", "log_sigmoid_backward"),
            Act::Softshrink { .. } => ("softshrink", "softshrink_backward"),
            Act::Hardshrink { .. } => ("hardshrink", "hardshrink_backward"),
            Act::Gelu { .. } => ("gelu_backward", "gelu_backward"),
        };
        if !matches!(act, Act::Gelu { .. }) {
            c.push(case(fwd, vec![r(&[3, 4], -2.5, 2.5)], true, move |t| {
                ferrotorch::backend::dispatch::call1(&ferrotorch::ops::activation::Activation(act), &[&t[0]])
            }));
        }
        c.push(case(bwd, vec![x(), r(&[3, 4], -2.5, 2.5)], true, move |t| {
            ferrotorch::backend::dispatch::call1(&ActivationGrad(act), &[&t[0], &t[1]])
        }));
    }
    c
}

/// Convolutions and pools (the operators and their backward operators,
/// called directly), in f64 with small shapes.
fn conv_pool_cases(g: &Generator) -> Vec<Case> {
    use ferrotorch::backend::dispatch::call;
    use ferrotorch::ops::conv::{ConvParams, ConvolutionBackward};
    use ferrotorch::ops::pool::{
        AdaptiveAvgPool2dBackward, AdaptiveMaxPool2dBackward, AvgPool2d, AvgPool2dBackward, MaxPool2dBackward,
        Pool2dParams,
    };
    use ferrotorch::{ConvOptions, ConvTransposeOptions, MaxPoolOptions};
    let r = |shape: &[usize]| rand(g, shape, -1.0, 1.0);
    let params = |transposed: bool| ConvParams {
        stride: [2, 1].into_iter().collect(),
        padding: [1, 0].into_iter().collect(),
        dilation: [1, 2].into_iter().collect(),
        transposed,
        output_padding: [1, 0].into_iter().collect(),
        groups: 2,
    };
    // The three gradients of a convolution as one output (all of them asked for).
    let conv_backward = |p: ConvParams| {
        move |t: &[Tensor]| -> Result<Tensor> {
            let op = ConvolutionBackward {
                params: p.clone(),
                output_mask: [true, true, true],
            };
            let outs = call(&op, &[&t[0], &t[1], &t[2]])?;
            let flat: Vec<Tensor> = outs.iter().map(|o| o.reshape(-1)).collect::<Result<_>>()?;
            Tensor::cat(&flat.iter().collect::<Vec<_>>(), 0)
        }
    };
    let pool = Pool2dParams {
        kernel: [3, 2],
        stride: [2, 1],
        padding: [1, 0],
        dilation: [1, 2],
        ceil_mode: true,
    };
    let avg = AvgPool2d {
        params: Pool2dParams {
            dilation: [1, 1],
            ..pool
        },
        count_include_pad: false,
        divisor_override: None,
    };
    let x = r(&[2, 2, 5, 6]);
    let (_, max_idx) = x
        .detach()
        .max_pool2d_with_indices(
            MaxPoolOptions::new((3, 2))
                .stride((2, 1))
                .padding((1, 0))
                .dilation((1, 2))
                .ceil_mode(true),
        )
        .unwrap();
    let (_, amax_idx) = x.detach().adaptive_max_pool2d([3, 4]).unwrap();
    vec![
        case(
            "convolution",
            vec![r(&[2, 4, 5, 6]), r(&[4, 2, 3, 2]), r(&[4])],
            true,
            |t| {
                t[0].conv2d(
                    &t[1],
                    Some(&t[2]),
                    ConvOptions::new()
                        .stride((2, 1))
                        .padding((1, 0))
                        .dilation((1, 2))
                        .groups(2),
                )
            },
        ),
        case(
            "convolution",
            vec![r(&[2, 4, 3, 4]), r(&[4, 2, 3, 2]), r(&[4])],
            true,
            |t| {
                let o = ConvTransposeOptions::new()
                    .stride((2, 1))
                    .padding((1, 0))
                    .dilation((1, 2))
                    .output_padding((1, 0));
                t[0].conv_transpose2d(&t[1], Some(&t[2]), o.groups(2))
            },
        ),
        case("convolution", vec![r(&[2, 2, 7]), r(&[3, 2, 3])], true, |t| {
            t[0].conv1d(&t[1], None, ConvOptions::new().stride(2).padding(1))
        }),
        case(
            "convolution_backward",
            vec![r(&[2, 4, 3, 4]), r(&[2, 4, 6, 6]), r(&[4, 2, 3, 2])],
            true,
            conv_backward(params(false)),
        ),
        case(
            "convolution_backward",
            vec![r(&[2, 4, 6, 6]), r(&[2, 4, 3, 4]), r(&[4, 2, 3, 2])],
            true,
            conv_backward(params(true)),
        ),
        case("max_pool2d_with_indices", vec![x.clone()], true, |t| {
            t[0].max_pool2d(
                MaxPoolOptions::new((3, 2))
                    .stride((2, 1))
                    .padding((1, 0))
                    .dilation((1, 2))
                    .ceil_mode(true),
            )
        }),
        case(
            "max_pool2d_with_indices_backward",
            vec![r(max_idx.shape()), x.clone()],
            true,
            move |t| call1(&MaxPool2dBackward { params: pool }, &[&t[0], &t[1], &max_idx]),
        ),
        case("avg_pool2d", vec![x.clone()], true, move |t| call1(&avg, &[&t[0]])),
        case(
            "avg_pool2d_backward",
            vec![r(&[2, 2, 3, 5]), x.clone()],
            true,
            move |t| call1(&AvgPool2dBackward(avg), &[&t[0], &t[1]]),
        ),
        case("_adaptive_avg_pool2d", vec![x.clone()], true, |t| {
            t[0].adaptive_avg_pool2d([3, 4])
        }),
        case(
            "_adaptive_avg_pool2d_backward",
            vec![r(&[2, 2, 3, 4]), x.clone()],
            true,
            |t| call1(&AdaptiveAvgPool2dBackward, &[&t[0], &t[1]]),
        ),
        case("adaptive_max_pool2d", vec![x.clone()], true, |t| {
            Ok(t[0].adaptive_max_pool2d([3, 4])?.0)
        }),
        case(
            "adaptive_max_pool2d_backward",
            vec![r(amax_idx.shape()), x],
            true,
            move |t| call1(&AdaptiveMaxPool2dBackward, &[&t[0], &t[1], &amax_idx]),
        ),
    ]
}

/// Operators whose outputs require grad as PyTorch's do but whose
/// derivative PyTorch does not implement either: backward is an error
/// with PyTorch's message (checked below).
const NO_DERIVATIVE: &[&str] = &["_unique2", "unique_dim", "unique_consecutive", "bincount"];

#[test]
fn operators_without_a_derivative_fail_at_backward_as_pytorch() -> Result<()> {
    let x = Tensor::new([[1.0f64, 2.0], [1.0, 2.0]])?.requires_grad_(true)?;
    let dim0 = ferrotorch::UniqueOptions {
        dim: Some(0),
        ..Default::default()
    };
    let cases = [
        (x.unique()?, "_unique2"),
        (x.unique_with(dim0)?.values, "unique_dim"),
        (x.unique_consecutive()?, "unique_consecutive"),
    ];
    for (u, name) in cases {
        assert!(u.requires_grad(), "{name}");
        let e = u.sum()?.backward().unwrap_err().to_string();
        assert!(
            e.contains(&format!("the derivative for '{name}' is not implemented")),
            "{e}"
        );
        assert!(NO_DERIVATIVE.contains(&name));
    }
    // bincount with weights: PyTorch's NotImplemented node.
    let w = Tensor::new([1.0f64, 2.0, 3.0])?.requires_grad_(true)?;
    let b = Tensor::new([0i64, 2, 2])?.bincount(Some(&w), 0)?;
    assert!(b.requires_grad());
    assert_eq!(b.grad_fn().map(|n| n.name()), Some("NotImplemented".into()));
    let e = b.sum()?.backward().unwrap_err().to_string();
    assert!(e.contains("derivative for aten::bincount is not implemented"), "{e}");
    assert!(NO_DERIVATIVE.contains(&"bincount"));
    Ok(())
}

#[test]
fn every_differentiable_operator_passes_gradcheck() {
    let cases = cases();
    let opts = GradcheckOptions::default();
    let mut missing = Vec::new();
    for e in registered_ops() {
        if e.is_differentiable() && !cases.iter().any(|c| c.op == e.name()) && !NO_DERIVATIVE.contains(&e.name()) {
            missing.push(e.name());
        }
    }
    assert!(
        missing.is_empty(),
        "differentiable operators without a gradcheck case: {missing:?}"
    );
    let mut failures = Vec::new();
    let mut second = 0;
    for c in &cases {
        if let Err(e) = gradcheck(&*c.f, &c.inputs, opts) {
            failures.push(format!("{}: {e}", c.op));
        }
        if c.second_order {
            second += 1;
            if let Err(e) = gradgradcheck(&*c.f, &c.inputs, opts) {
                failures.push(format!("{} (second order): {e}", c.op));
            }
        }
    }
    println!("gradcheck: {} cases, {second} with gradgradcheck", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
