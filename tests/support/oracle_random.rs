//! `run_op` of `tests/oracle.rs` for the random ops of
//! `tests/oracle_extra/random.json` (written by `tests/gen_random_oracle.py`):
//! the in-place fills, `randperm`, `multinomial`, `poisson` and `normal`
//! with tensor arguments. Also used by `tests/random_ops.rs`, so it depends
//! on nothing of `oracle.rs`.
//!
//! `seed` in a case's kwargs stands for `torch.manual_seed(seed)`: this
//! thread's stand-in for PyTorch's global generator is reseeded; a call
//! without `seed` (a later step of a chain) continues with it. The
//! explicit-generator form of each op (`_with`) draws from it, so the
//! process-wide generator other tests may use is never touched.

use std::cell::RefCell;

use ferrotorch::{DType, Generator, Operand, Scalar, Tensor, TensorOptions};
use serde_json::Value;

#[allow(unused_imports)]
pub use super::oracle_json::decode;
#[allow(unused_imports)]
use super::oracle_json::{input, kw, num};

thread_local! {
    static GENERATOR: RefCell<Option<Generator>> = const { RefCell::new(None) };
}

/// The generator of a call: reseeded when the case has a `seed`.
fn generator(case: &Value) -> Generator {
    GENERATOR.with(|g| {
        let mut g = g.borrow_mut();
        match kw(case, "seed").and_then(Value::as_u64) {
            Some(seed) => {
                let fresh = Generator::new(seed);
                *g = Some(fresh.clone());
                fresh
            }
            None => g.get_or_insert_with(|| Generator::new(0)).clone(),
        }
    })
}

fn has_kw(case: &Value, key: &str) -> bool {
    case["kwargs"].get(key).is_some()
}

fn num_or(case: &Value, key: &str, default: f64) -> f64 {
    kw(case, key).map(num).unwrap_or(default)
}

/// A scalar or the named tensor input.
fn operand<'a>(case: &Value, inputs: &'a [Tensor], name: &str) -> Option<Operand<'a>> {
    match input(case, inputs, name) {
        Some(t) => Some(Operand::Tensor(t)),
        None => kw(case, name).map(|v| Operand::Scalar(Scalar::Float(num(v)))),
    }
}

/// The ops of this module (`torch.normal` only in its tensor forms).
#[allow(dead_code)]
pub const OPS: &[&str] = &[
    "uniform_",
    "normal_",
    "bernoulli_",
    "random_",
    "exponential_",
    "geometric_",
    "cauchy_",
    "log_normal_",
    "randperm",
    "multinomial",
    "poisson",
    "normal",
];

/// Runs the case's op if it is one of this module's (`short`: the name
/// without `torch.` / `torch.Tensor.`); `None` otherwise.
pub fn run_op(short: &str, case: &Value, inputs: &[Tensor]) -> Option<ferrotorch::Result<Vec<Tensor>>> {
    let x = || {
        input(case, inputs, "self")
            .or(input(case, inputs, "input"))
            .or(inputs.first())
    };
    let r = match short {
        "uniform_" => x()?.uniform_with_(num_or(case, "from", 0.0), num_or(case, "to", 1.0), &generator(case)),
        "normal_" => x()?.normal_with_(num_or(case, "mean", 0.0), num_or(case, "std", 1.0), &generator(case)),
        "bernoulli_" => {
            let p = operand(case, inputs, "p").unwrap_or(Operand::Scalar(Scalar::Float(0.5)));
            x()?.bernoulli_with_(p, &generator(case))
        }
        "random_" => {
            let g = generator(case);
            let to = kw(case, "to").and_then(Value::as_i64);
            match kw(case, "from").and_then(Value::as_i64) {
                Some(from) => x()?.random_from_with_(from, to, &g),
                None => match to {
                    Some(to) => x()?.random_to_with_(to, &g),
                    None => x()?.random_with_(&g),
                },
            }
        }
        "exponential_" => x()?.exponential_with_(num_or(case, "lambd", 1.0), &generator(case)),
        "geometric_" => x()?.geometric_with_(num(kw(case, "p")?), &generator(case)),
        "cauchy_" => x()?.cauchy_with_(
            num_or(case, "median", 0.0),
            num_or(case, "sigma", 1.0),
            &generator(case),
        ),
        "log_normal_" => x()?.log_normal_with_(num_or(case, "mean", 1.0), num_or(case, "std", 2.0), &generator(case)),
        "randperm" => {
            let mut o = TensorOptions::new().generator(&generator(case));
            if let Some(d) = kw(case, "dtype") {
                o = o.dtype(DType::from_name(d.as_str()?)?);
            }
            o.randperm(kw(case, "n")?.as_i64()?)
        }
        "multinomial" => x()?.multinomial_with(
            kw(case, "num_samples")?.as_i64()?,
            kw(case, "replacement").and_then(Value::as_bool).unwrap_or(false),
            &generator(case),
        ),
        "poisson" => x()?.poisson_with(&generator(case)),
        // torch.normal with a tensor mean and/or std (the size form is oracle.rs's).
        "normal" if !has_kw(case, "size") => Tensor::normal_tensor_with(
            operand(case, inputs, "mean")?,
            operand(case, inputs, "std")?,
            &generator(case),
        ),
        _ => return None,
    };
    Some(r.map(|t| vec![t]))
}
