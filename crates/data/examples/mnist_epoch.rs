//! Times loading MNIST and one epoch of the training loader (batch 64,
//! ToTensor + Normalize, shuffled) with 0 and 2 workers:
//! `cargo run --release -p ferrotorch-data --example mnist_epoch [root]`.

use std::time::Instant;

use ferrotorch_data::datasets::MNIST;
use ferrotorch_data::transforms::{Compose, Normalize, ToTensor};
use ferrotorch_data::{DataLoader, Dataset};

fn main() -> ferrotorch_data::Result<()> {
    let root = std::env::args().nth(1).unwrap_or_else(|| "data/mnist".into());
    let t = Instant::now();
    let train = MNIST::new(&root, true)?;
    println!("load: {} images in {:.3} s", train.len(), t.elapsed().as_secs_f64());
    let train = train.with_transform(Compose::new().then(ToTensor).then(Normalize::new([0.1307], [0.3081])));
    for workers in [0, 2] {
        let loader = DataLoader::builder(train.clone())
            .batch_size(64)
            .shuffle(true)
            .num_workers(workers)
            .build()?;
        let t = Instant::now();
        let mut n = 0;
        for batch in loader.iter()? {
            let (x, y) = batch?;
            n += y.shape()[0];
            assert_eq!(x.shape()[1..], [1, 28, 28]);
        }
        println!(
            "epoch, {workers} workers: {n} images in {:.3} s",
            t.elapsed().as_secs_f64()
        );
    }
    let t = Instant::now();
    let all = train.images_float()?;
    println!("images_float {:?} in {:.3} s", all.shape(), t.elapsed().as_secs_f64());
    Ok(())
}
