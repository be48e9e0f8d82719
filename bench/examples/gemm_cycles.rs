//! Runs `iters` sgemm calls of size n on one thread, for `perf stat` cycle
//! counts (flops per cycle are steadier than times on a shared machine):
//! `perf stat -e cycles:u target/release/examples/gemm_cycles 1024 20`.
//! Arguments: `n iters [threads]`; `FT_MKN=m,k,n` times an `m x k @ k x n` product instead;
//! `FT_T=tn` (or `nt`, `tt`) makes A (B) the transposed view of a row-major matrix, as in
//! a linear layer's backward.

fn main() -> ferrotorch::Result<()> {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (n, iters) = (
        args.first().copied().unwrap_or(1024),
        args.get(1).copied().unwrap_or(10),
    );
    let threads = args.get(2).copied().unwrap_or(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
    pool.install(|| {
        let mkn: Vec<usize> = std::env::var("FT_MKN")
            .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_else(|_| vec![n, n, n]);
        let (m, k, nn) = (mkn[0], mkn[1], mkn[2]);
        let layout = std::env::var("FT_T").unwrap_or_default();
        let a = if layout.starts_with('t') {
            ferrotorch::Tensor::randn([k, m])?.t()?
        } else {
            ferrotorch::Tensor::randn([m, k])?
        };
        let b = if layout.ends_with('t') {
            ferrotorch::Tensor::randn([nn, k])?.t()?
        } else {
            ferrotorch::Tensor::randn([k, nn])?
        };
        let flop = 2.0 * (m * k * nn) as f64;
        let t = std::time::Instant::now();
        let mut best = f64::INFINITY;
        for _ in 0..iters {
            let one = std::time::Instant::now();
            std::hint::black_box(a.mm(&b)?);
            best = best.min(one.elapsed().as_secs_f64());
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "{m}x{k}x{nn} iters={iters}: {:.1} GFLOP/s mean, {:.1} GFLOP/s best",
            flop * iters as f64 / s / 1e9,
            flop / best / 1e9
        );
        Ok(())
    })
}
