//! The random ops beyond their samples (which `tests/oracle.rs` checks
//! against `tests/oracle_extra/random.json`): PyTorch's error messages for
//! every error case of that file, in-place semantics (version counter,
//! autograd's leaf check, non-contiguous and expanded targets, the meta
//! device), the generator a call draws from and how far it advances.

#[path = "support/oracle_json.rs"]
mod oracle_json;
#[path = "support/oracle_random.rs"]
mod oracle_random;

use ferrotorch::{DType, Device, Generator, Result, Tensor, TensorOptions};
use serde_json::Value;

/// Lower case, whitespace collapsed: PyTorch's messages up to spacing and
/// capitals (ferrotorch's shared expand / broadcast errors differ there).
fn normalised(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Every error case of `random.json` fails with PyTorch's message.
#[test]
fn errors_carry_pytorchs_messages() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle_extra/random.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        if case.get("kind").and_then(Value::as_str) != Some("error") {
            continue;
        }
        let name = case["name"].as_str().unwrap();
        let inputs: Vec<Tensor> = case["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(oracle_random::decode)
            .collect();
        let op = case["op"].as_str().unwrap();
        let short = op.strip_prefix("torch.Tensor.").or(op.strip_prefix("torch.")).unwrap();
        let result = match short {
            "bernoulli" => Some(inputs[0].bernoulli().map(|t| vec![t])),
            _ => oracle_random::run_op(short, case, &inputs),
        };
        let want = case["error"].as_str().unwrap();
        match result {
            None => wrong.push(format!("{name}: op {op} not run")),
            Some(Ok(_)) => wrong.push(format!("{name}: succeeded; PyTorch raises \"{want}\"")),
            Some(Err(e)) => {
                let got = e.to_string();
                if !normalised(&got).contains(&normalised(want)) {
                    wrong.push(format!("{name}: \"{got}\" lacks PyTorch's \"{want}\""));
                }
            }
        }
        checked += 1;
    }
    assert!(checked > 50, "only {checked} error cases");
    assert!(wrong.is_empty(), "{} of {checked}:\n{}", wrong.len(), wrong.join("\n"));
}

#[test]
fn in_place_fills_write_self_and_bump_its_version() -> Result<()> {
    let g = Generator::new(3);
    let x = Tensor::zeros([4, 5])?;
    let v0 = x.version();
    let y = x.uniform_with_(2.0, 3.0, &g)?;
    assert!(y.is_same(&x));
    assert_eq!(x.version(), v0 + 1);
    assert!(x.to_vec::<f32>()?.iter().all(|v| (2.0..3.0).contains(v)));
    // A view writes through to its base.
    let base = Tensor::zeros(10)?;
    base.narrow(0, 2, 3)?.fill_(1.0)?;
    base.narrow(0, 5, 5)?.normal_with_(10.0, 0.1, &g)?;
    let v = base.to_vec::<f32>()?;
    assert_eq!(&v[..5], &[0.0, 0.0, 1.0, 1.0, 1.0]);
    assert!(v[5..].iter().all(|&x| (9.0..11.0).contains(&x)));
    Ok(())
}

#[test]
fn in_place_fill_of_a_leaf_that_requires_grad_is_refused() -> Result<()> {
    let x = Tensor::zeros(3)?.requires_grad_(true)?;
    let e = x.normal_(0.0, 1.0).unwrap_err().to_string();
    assert!(
        e.contains("a leaf Variable that requires grad is being used in an in-place operation"),
        "{e}"
    );
    // Under no_grad it is allowed (nn.init does this), and draws nothing else.
    ferrotorch::autograd::no_grad(|| x.uniform_with_(-1.0, 1.0, &Generator::new(0)))?;
    assert!(x.requires_grad());
    Ok(())
}

#[test]
fn samplers_with_tensor_parameters_record_pytorchs_zero_gradient_nodes() -> Result<()> {
    let p = Tensor::from_slice(&[0.2f32, 0.8]).requires_grad_(true)?;
    let s = Tensor::from_slice(&[1.0f32, 2.0]).requires_grad_(true)?;
    let g = Generator::new(1);
    let node = |t: &Tensor| t.grad_fn().map(|n| n.name().to_string());
    let cases = [
        (p.bernoulli_with(&g)?, "BernoulliBackward0"),
        (p.poisson_with(&g)?, "PoissonBackward0"),
        (Tensor::normal_tensor_with(&p, 1.0, &g)?, "NormalBackward1"),
        (Tensor::normal_tensor_with(0.0, &s, &g)?, "NormalBackward2"),
        (Tensor::normal_tensor_with(&p, &s, &g)?, "NormalBackward3"),
    ];
    for (t, want) in &cases {
        assert!(t.requires_grad());
        assert_eq!(node(t).as_deref(), Some(*want));
    }
    // The same numbers as without grad.
    let plain = Tensor::normal_tensor_with(&p.detach(), &s.detach(), &Generator::new(7))?;
    let tracked = Tensor::normal_tensor_with(&p, &s, &Generator::new(7))?;
    assert_eq!(plain.to_vec::<f32>()?, tracked.to_vec::<f32>()?);
    // The gradient is zero, as PyTorch's.
    cases[4].0.sum()?.backward()?;
    assert_eq!(p.grad()?.to_vec::<f32>()?, [0.0, 0.0]);
    assert_eq!(s.grad()?.to_vec::<f32>()?, [0.0, 0.0]);
    // No history without grad mode, or when no parameter requires grad.
    let q = ferrotorch::autograd::no_grad(|| p.bernoulli_with(&g))?;
    assert!(!q.requires_grad());
    assert!(!p.detach().bernoulli_with(&g)?.requires_grad());
    Ok(())
}

#[test]
fn expanded_targets_are_refused() -> Result<()> {
    let x = Tensor::zeros(1)?.expand([3])?;
    let e = x.uniform_(0.0, 1.0).unwrap_err().to_string();
    assert!(e.contains("more than one element of the written-to tensor"), "{e}");
    Ok(())
}

#[test]
fn meta_tensors_get_shapes_and_checks() -> Result<()> {
    let meta = TensorOptions::new().device(Device::Meta);
    let x = meta.zeros([2, 3])?;
    assert_eq!(x.normal_(0.0, 1.0)?.shape(), [2, 3]);
    assert!(x.exponential_(-1.0).is_err());
    let p = meta.ones([4, 6])?;
    assert_eq!(p.multinomial(3, false)?.shape(), [4, 3]);
    assert!(p.multinomial(7, false).is_err());
    assert_eq!(meta.randperm(5)?.shape(), [5]);
    assert_eq!(p.poisson()?.shape(), [4, 6]);
    assert_eq!(Tensor::normal_tensor(&p, &meta.ones([6])?)?.shape(), [4, 6]);
    Ok(())
}

/// The next 32 bits a generator would give (how far a call advanced it).
fn next_draw(g: &Generator) -> u32 {
    g.lock().next_u32()
}

#[test]
fn draws_per_call_match_pytorch() -> Result<()> {
    // (what, draws of 32 bits it takes)
    type Sampler = Box<dyn Fn(&Generator) -> Result<Tensor>>;
    let cases: Vec<(&str, Sampler, usize)> = vec![
        (
            "rand f32 x5",
            Box::new(|g| Tensor::zeros(5)?.uniform_with_(0.0, 1.0, g)),
            5,
        ),
        (
            "rand f64 x5",
            Box::new(|g| {
                TensorOptions::new()
                    .dtype(DType::F64)
                    .zeros(5)?
                    .uniform_with_(0.0, 1.0, g)
            }),
            10,
        ),
        (
            "normal f32 x17 (block path: 17 + 16)",
            Box::new(|g| Tensor::zeros(17)?.normal_with_(0.0, 1.0, g)),
            33,
        ),
        (
            "normal f16 x17 (16 + 16)",
            Box::new(|g| {
                TensorOptions::new()
                    .dtype(DType::F16)
                    .zeros(17)?
                    .normal_with_(0.0, 1.0, g)
            }),
            32,
        ),
        (
            "normal f32 x4 (scalar path: 2 pairs)",
            Box::new(|g| Tensor::zeros(4)?.normal_with_(0.0, 1.0, g)),
            8,
        ),
        (
            "bernoulli p=0 (still draws)",
            Box::new(|g| Tensor::zeros(3)?.bernoulli_with_(0.0, g)),
            6,
        ),
        (
            "random_ to 2^28 (64-bit draws)",
            Box::new(|g| {
                TensorOptions::new()
                    .dtype(DType::I64)
                    .zeros(3)?
                    .random_to_with_(1 << 28, g)
            }),
            6,
        ),
        (
            "random_ to 2^28 - 1 (32-bit draws)",
            Box::new(|g| {
                TensorOptions::new()
                    .dtype(DType::I64)
                    .zeros(3)?
                    .random_to_with_((1 << 28) - 1, g)
            }),
            3,
        ),
        (
            "randperm 10 (n - 1 draws)",
            Box::new(|g| TensorOptions::new().generator(g).randperm(10)),
            9,
        ),
        (
            "multinomial without replacement (one per probability)",
            Box::new(|g| Tensor::ones([2, 5])?.multinomial_with(2, false, g)),
            20,
        ),
        (
            "multinomial with replacement (one per sample)",
            Box::new(|g| Tensor::ones([2, 5])?.multinomial_with(3, true, g)),
            12,
        ),
        (
            "empty tensor (no draw)",
            Box::new(|g| Tensor::zeros([0, 4])?.normal_with_(0.0, 1.0, g)),
            0,
        ),
    ];
    for (what, f, draws) in cases {
        let (g, reference) = (Generator::new(11), Generator::new(11));
        f(&g)?;
        for _ in 0..draws {
            next_draw(&reference);
        }
        assert_eq!(next_draw(&g), next_draw(&reference), "{what}");
    }
    Ok(())
}

#[test]
fn a_bad_probability_stops_the_fill_after_the_draws_before_it() -> Result<()> {
    // PyTorch checks tensor probabilities as it reaches them: the elements
    // before a bad one are drawn (and written), the rest are not.
    let (g, reference) = (Generator::new(5), Generator::new(5));
    let p = Tensor::from_slice(&[0.5f64, 0.5, 1.5, 0.5]);
    assert!(Tensor::zeros(4)?.bernoulli_with_(&p, &g).is_err());
    for _ in 0..4 {
        next_draw(&reference); // two 64-bit draws
    }
    assert_eq!(next_draw(&g), next_draw(&reference));
    Ok(())
}

/// The only test of this binary that draws from the global generator.
#[test]
fn global_generator_is_the_default() -> Result<()> {
    ferrotorch::manual_seed(77);
    let a = Tensor::zeros(40)?.normal_(0.5, 2.0)?;
    let p = Tensor::from_slice(&[0.3f32, 0.7, 0.0]).multinomial(2, false)?;
    let g = Generator::new(77);
    let b = Tensor::zeros(40)?.normal_with_(0.5, 2.0, &g)?;
    let q = Tensor::from_slice(&[0.3f32, 0.7, 0.0]).multinomial_with(2, false, &g)?;
    assert_eq!(a.to_vec::<f32>()?, b.to_vec::<f32>()?);
    assert_eq!(p.to_vec::<i64>()?, q.to_vec::<i64>()?);
    Ok(())
}
