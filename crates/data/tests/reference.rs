//! Samplers, `random_split` and the shuffled `DataLoader` against
//! PyTorch 2.15's indices for the same seeds (`gen_data_ref.py` wrote
//! `tests/data/*.json`).

use ferrotorch_core::{Generator, Tensor, manual_seed};
use ferrotorch_data::{
    BatchSampler, DataLoader, Dataset, DistributedSampler, RandomSampler, Sampler, SubsetRandomSampler, TensorDataset,
    WeightedRandomSampler, random_split, random_split_fractions,
};
use serde_json::Value;
use std::sync::Mutex;

/// The tests seed the global generator: one at a time.
static GLOBAL: Mutex<()> = Mutex::new(());

fn cases(name: &str) -> Vec<Value> {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["cases"].as_array().unwrap().clone()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn nested(v: &Value) -> Vec<Vec<usize>> {
    v.as_array().unwrap().iter().map(usizes).collect()
}

fn epoch<S: Sampler>(s: &S) -> Vec<usize> {
    s.iter().collect::<Result<_, _>>().unwrap()
}

fn global_after() -> Vec<usize> {
    Tensor::randint(0, 1000, [3])
        .unwrap()
        .to_vec::<i64>()
        .unwrap()
        .into_iter()
        .map(|x| x as usize)
        .collect()
}

fn seed_of(c: &Value) -> u64 {
    c["seed"].as_u64().unwrap()
}

#[test]
fn random_sampler_orders() {
    let _g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases = cases("random_sampler.json");
    assert!(cases.len() >= 100);
    for c in &cases {
        let n = c["n"].as_u64().unwrap() as usize;
        let replacement = c["replacement"].as_bool().unwrap();
        let num_samples = c["num_samples"].as_u64().map(|x| x as usize);
        let generator = c["generator"].as_bool().unwrap().then(|| Generator::new(seed_of(c)));
        manual_seed(seed_of(c));
        let s = RandomSampler::with_options(n, replacement, num_samples, generator).unwrap();
        let got: Vec<Vec<usize>> = (0..2).map(|_| epoch(&s)).collect();
        assert_eq!(got, nested(&c["epochs"]), "case {c}");
        assert_eq!(s.len(), got[0].len());
        assert_eq!(global_after(), usizes(&c["global_after"]), "global state after {c}");
    }
}

#[test]
fn dataloader_shuffle_epochs() {
    let _g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    for c in cases("dataloader_shuffle.json") {
        let n = c["n"].as_u64().unwrap() as usize;
        let ds = TensorDataset::new(Tensor::arange(n as i64).unwrap()).unwrap();
        let mut b = DataLoader::builder(ds)
            .batch_size(c["batch_size"].as_u64().unwrap() as usize)
            .shuffle(true)
            .drop_last(c["drop_last"].as_bool().unwrap())
            .num_workers(c["num_workers"].as_u64().unwrap() as usize)
            .persistent_workers(c["persistent_workers"].as_bool().unwrap());
        if c["generator"].as_bool().unwrap() {
            b = b.generator(Generator::new(seed_of(&c)));
        }
        manual_seed(seed_of(&c));
        let loader = b.build().unwrap();
        assert_eq!(loader.len().unwrap(), c["len"].as_u64().unwrap() as usize);
        let mut epochs = Vec::new();
        for _ in 0..2 {
            let mut batches = Vec::new();
            for batch in loader.iter().unwrap() {
                let t = batch.unwrap();
                batches.push(
                    t.to_vec::<i64>()
                        .unwrap()
                        .into_iter()
                        .map(|x| x as usize)
                        .collect::<Vec<_>>(),
                );
            }
            epochs.push(batches);
        }
        let want: Vec<Vec<Vec<usize>>> = c["epochs"].as_array().unwrap().iter().map(nested).collect();
        assert_eq!(epochs, want, "case {c}");
        // What the loader drew from the global generator (base seeds and
        // sampler seeds), workers or not.
        assert_eq!(global_after(), usizes(&c["global_after"]), "global state after {c}");
    }
}

#[test]
fn random_split_indices() {
    let _g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    for c in cases("random_split.json") {
        let n = c["n"].as_u64().unwrap() as usize;
        let ds = TensorDataset::new(Tensor::arange(n as i64).unwrap()).unwrap();
        let generator = c["generator"].as_bool().unwrap().then(|| Generator::new(seed_of(&c)));
        manual_seed(seed_of(&c));
        let parts = if c["fractions"].as_bool().unwrap() {
            let f: Vec<f64> = c["lengths"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect();
            random_split_fractions(&ds, &f, generator.as_ref()).unwrap()
        } else {
            random_split(&ds, &usizes(&c["lengths"]), generator.as_ref()).unwrap()
        };
        let got: Vec<Vec<usize>> = parts.iter().map(|p| p.indices().to_vec()).collect();
        assert_eq!(got, nested(&c["splits"]), "case {c}");
        for p in &parts {
            for (k, &i) in p.indices().iter().enumerate() {
                assert_eq!(p.get(k).unwrap().item::<i64>().unwrap(), i as i64);
            }
        }
    }
}

#[test]
fn distributed_sampler_orders() {
    for c in cases("distributed_sampler.json") {
        let s = DistributedSampler::new(
            c["n"].as_u64().unwrap() as usize,
            c["num_replicas"].as_u64().unwrap() as usize,
            c["rank"].as_u64().unwrap() as usize,
        )
        .unwrap()
        .shuffle(c["shuffle"].as_bool().unwrap())
        .drop_last(c["drop_last"].as_bool().unwrap())
        .seed(c["seed"].as_u64().unwrap());
        s.set_epoch(c["epoch"].as_u64().unwrap());
        assert_eq!(s.len(), c["len"].as_u64().unwrap() as usize, "case {c}");
        // `total_size`: padded up (or, with `drop_last`, cut down) to a
        // multiple of `num_replicas`.
        assert_eq!(s.total_size(), c["total_size"].as_u64().unwrap() as usize, "case {c}");
        assert_eq!(epoch(&s), usizes(&c["indices"]), "case {c}");
    }
}

#[test]
fn weighted_random_sampler_draws() {
    let _g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    for c in cases("weighted_sampler.json") {
        let w: Vec<f64> = c["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let generator = c["generator"].as_bool().unwrap().then(|| Generator::new(seed_of(&c)));
        manual_seed(seed_of(&c));
        let s = WeightedRandomSampler::new(
            &w,
            c["num_samples"].as_u64().unwrap() as usize,
            c["replacement"].as_bool().unwrap(),
            generator,
        )
        .unwrap();
        let got: Vec<Vec<usize>> = (0..2).map(|_| epoch(&s)).collect();
        assert_eq!(got, nested(&c["epochs"]), "case {c}");
    }
}

#[test]
fn subset_random_sampler_orders() {
    let _g = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
    for c in cases("subset_random_sampler.json") {
        let generator = c["generator"].as_bool().unwrap().then(|| Generator::new(seed_of(&c)));
        manual_seed(seed_of(&c));
        let s = SubsetRandomSampler::new(usizes(&c["indices"]), generator);
        let got: Vec<Vec<usize>> = (0..2).map(|_| epoch(&s)).collect();
        assert_eq!(got, nested(&c["epochs"]), "case {c}");
        let b = BatchSampler::new(&s, 4, false).unwrap();
        let third: Vec<Vec<usize>> = b.iter().collect::<Result<_, _>>().unwrap();
        assert_eq!(third, nested(&c["batched_third"]), "case {c}");
    }
}
