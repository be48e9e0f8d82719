//! The pointwise engine's in-place row path: rows of 16 or more elements
//! whose operands are all contiguous runs but not one dense block (a
//! transposed outer dim) run row by row in place. Results must equal the
//! same operation on contiguous copies, including beside operands that
//! still take the gathering path (a broadcast inner dim, a dtype cast, an
//! input sharing the output's memory).

use ferrotorch_core::{DType, Result, Tensor};

fn bits(t: &Tensor) -> Vec<u32> {
    t.to_dtype(DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}

#[test]
fn strided_rows_match_contiguous_operands() -> Result<()> {
    for inner in [15usize, 16, 20, 33, 1000, 1100] {
        // [6, 5, inner] viewed as [5, 6, inner]: every row contiguous, the
        // outer dims transposed.
        let x = Tensor::randn([6, 5, inner])?.transpose(0, 1)?;
        let y = Tensor::randn([5, 6, inner])?;
        assert!(!x.is_contiguous());
        let xc = x.contiguous()?;
        assert_eq!(bits(&x.add(&y)?), bits(&xc.add(&y)?), "add, inner {inner}");
        assert_eq!(bits(&x.exp()?), bits(&xc.exp()?), "exp, inner {inner}");
        assert_eq!(bits(&x.contiguous()?), bits(&xc), "copy, inner {inner}");
        // A transposed output: out = x + y written through a strided view.
        let out = Tensor::zeros([6, 5, inner])?;
        out.transpose(0, 1)?.copy_(&xc.add(&y)?)?;
        assert_eq!(
            bits(&out.transpose(0, 1)?),
            bits(&xc.add(&y)?),
            "strided output, inner {inner}"
        );
        // A broadcast inner dim (stride 0) and a cast keep the gathering path.
        let col = Tensor::randn([5, 6, 1])?;
        assert_eq!(bits(&x.mul(&col)?), bits(&xc.mul(&col)?), "broadcast, inner {inner}");
        let xd = x.to_dtype(DType::F64)?;
        assert_eq!(
            bits(&xd.add(&y)?),
            bits(&xc.to_dtype(DType::F64)?.add(&y)?),
            "cast, inner {inner}"
        );
        // In place on a strided view, the input being the output itself.
        let z = Tensor::randn([6, 5, inner])?;
        let zc = z.transpose(0, 1)?.contiguous()?;
        z.transpose(0, 1)?.add_(&z.transpose(0, 1)?)?;
        assert_eq!(
            bits(&z.transpose(0, 1)?),
            bits(&zc.add(&zc)?),
            "in place, inner {inner}"
        );
    }
    Ok(())
}
