//! Generator states as `torch.get_rng_state()` bytes: ours equal PyTorch's
//! after the same seed and draws, and a state PyTorch wrote restores here
//! to the draws PyTorch made next (tests/data/rng_state.json, written by
//! tests/gen_rng_state.py).

use ferrotorch::random::GeneratorState;
use ferrotorch::{DType, Generator, RNG_STATE_BYTES, Tensor, TensorOptions, get_rng_state, manual_seed, set_rng_state};
use serde_json::Value;

struct Case {
    name: String,
    seed: u64,
    state: Vec<u8>,
    next_rand_f64: Vec<f64>,
    next_randn_f64: Vec<f64>,
    next_randn_f32: Vec<f32>,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/rng_state.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let floats = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect() };
    json["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let hex = c["state"].as_str().unwrap();
            let state = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            Case {
                name: c["name"].as_str().unwrap().to_string(),
                seed: c["seed"].as_u64().unwrap(),
                state,
                next_rand_f64: floats(&c["next_rand_f64"]),
                next_randn_f64: floats(&c["next_randn_f64"]),
                next_randn_f32: floats(&c["next_randn_f32"]).into_iter().map(|v| v as f32).collect(),
            }
        })
        .collect()
}

/// The draw each case makes after seeding, on `g`.
fn draw(name: &str, g: &Generator) -> ferrotorch::Result<()> {
    let o = TensorOptions::new().generator(g);
    match name {
        "fresh_seed0" => {}
        "seed42_rand7" => drop(o.rand([7])?),
        "seed7_randn3" => drop(o.randn([3])?),
        "seed7_randn3_f64" => drop(o.dtype(DType::F64).randn([3])?),
        "seed3_624_draws" => drop(o.randint(0, 1000, [624])?),
        "seed5_bernoulli" => drop(o.empty([1000])?.bernoulli_with_(0.9, g)?),
        other => panic!("no draw for case {other}"),
    }
    Ok(())
}

/// The draws PyTorch made after taking the state, on `g`.
fn check_next(case: &Case, g: &Generator) -> ferrotorch::Result<()> {
    let o = TensorOptions::new().generator(g);
    assert_eq!(
        o.clone().dtype(DType::F64).rand([5])?.to_vec::<f64>()?,
        case.next_rand_f64,
        "{}: rand",
        case.name
    );
    assert_eq!(
        o.clone().dtype(DType::F64).randn([3])?.to_vec::<f64>()?,
        case.next_randn_f64,
        "{}: randn f64",
        case.name
    );
    assert_eq!(
        o.randn([3])?.to_vec::<f32>()?,
        case.next_randn_f32,
        "{}: randn f32",
        case.name
    );
    Ok(())
}

#[test]
fn our_state_bytes_equal_pytorchs() -> ferrotorch::Result<()> {
    for case in cases() {
        let g = Generator::new(case.seed);
        draw(&case.name, &g)?;
        let ours = g.get_state().to_bytes();
        assert_eq!(ours.len(), RNG_STATE_BYTES);
        let first_diff = ours.iter().zip(&case.state).position(|(a, b)| a != b);
        assert_eq!(first_diff, None, "{}: first differing byte", case.name);
        check_next(&case, &g)?;
    }
    Ok(())
}

#[test]
fn pytorch_state_restores_pytorchs_next_draws() -> ferrotorch::Result<()> {
    for case in cases() {
        // A generator in another state entirely, then PyTorch's state.
        let g = Generator::new(12345);
        g.set_state_tensor(&Tensor::from_vec(case.state.clone(), [RNG_STATE_BYTES])?)?;
        assert_eq!(g.initial_seed(), case.seed);
        assert_eq!(g.get_state().to_bytes(), case.state, "{}: round trip", case.name);
        check_next(&case, &g)?;
    }
    Ok(())
}

#[test]
fn global_generator_state_round_trips() -> ferrotorch::Result<()> {
    manual_seed(3);
    let _ = Tensor::randn([5])?;
    let state = get_rng_state()?;
    assert_eq!(state.dtype(), DType::U8);
    assert_eq!(state.shape(), [RNG_STATE_BYTES]);
    let a = Tensor::rand([4])?.to_vec::<f32>()?;
    set_rng_state(&state)?;
    assert_eq!(Tensor::rand([4])?.to_vec::<f32>()?, a);
    Ok(())
}

#[test]
fn bad_states_are_errors_that_change_nothing() -> ferrotorch::Result<()> {
    let good = Generator::new(9).get_state().to_bytes();
    let g = Generator::new(1);
    let before = g.get_state();
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = good.clone();
        f(&mut b);
        b
    };
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("short", good[..100].to_vec()),
        ("long", with(&|b| b.push(0))),
        ("left 0", with(&|b| b[8..12].copy_from_slice(&0i32.to_le_bytes()))),
        ("left 625", with(&|b| b[8..12].copy_from_slice(&625i32.to_le_bytes()))),
        ("not seeded", with(&|b| b[12..16].copy_from_slice(&0i32.to_le_bytes()))),
        ("next 625", with(&|b| b[16..24].copy_from_slice(&625u64.to_le_bytes()))),
        ("word over 32 bits", with(&|b| b[24 + 8 * 5 + 4] = 1)),
        (
            "next disagrees with left",
            with(&|b| {
                b[8..12].copy_from_slice(&10i32.to_le_bytes());
                b[16..24].copy_from_slice(&3u64.to_le_bytes());
            }),
        ),
    ];
    for (what, bytes) in bad {
        let n = bytes.len();
        let err = g
            .set_state_tensor(&Tensor::from_vec(bytes, [n])?)
            .expect_err(what)
            .to_string();
        assert!(err.contains("set_rng_state"), "{what}: {err}");
        assert!(g.get_state() == before, "{what}: the generator changed");
    }
    let floats = Tensor::zeros([RNG_STATE_BYTES])?;
    let err = g.set_state_tensor(&floats).unwrap_err().to_string();
    assert!(err.contains("uint8"), "{err}");
    assert!(GeneratorState::from_bytes(&good).is_ok());
    Ok(())
}
