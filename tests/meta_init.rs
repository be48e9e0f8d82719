//! Building a model on the meta device and materialising it later, as in
//! PyTorch: `with torch.device("meta"): m = Model()`, then
//! `m.to_empty(device="cpu")` and `m.reset_parameters()`.

use ferrotorch::nn::{Forward, Linear, Module, ReLU, Sequential};
use ferrotorch::optim::{AdamW, AdamWOptions, Optimizer};
use ferrotorch::{Device, Result, Tensor, default_device_scope, manual_seed};

fn bits(t: &Tensor) -> Result<Vec<u32>> {
    Ok(t.to_vec::<f32>()?.iter().map(|v| v.to_bits()).collect())
}

#[test]
fn a_model_built_on_meta_is_materialised_and_initialised_as_on_the_cpu() -> Result<()> {
    let (l1, l2) = {
        let _meta = default_device_scope(Device::Meta);
        (Linear::new(8, 16)?, Linear::new(16, 4)?)
    };
    assert_eq!(l1.weight.tensor().device(), Device::Meta);
    // Shape-only forward passes work on meta.
    let y = l2.call(&l1.call(&ferrotorch::TensorOptions::new().device(Device::Meta).randn([2, 8])?)?)?;
    assert_eq!((y.device(), y.shape()), (Device::Meta, &[2usize, 4][..]));
    // An optimizer built now keeps working after materialisation (same handles).
    let params: Vec<_> = l1.parameters().into_iter().chain(l2.parameters()).collect();
    let mut opt = AdamW::new(params.clone(), AdamWOptions::default())?;
    l1.to_empty(Device::Cpu)?;
    l2.to_empty(Device::Cpu)?;
    assert!(params.iter().all(|p| p.tensor().device() == Device::Cpu));
    manual_seed(7);
    l1.reset_parameters()?;
    l2.reset_parameters()?;
    // The same values as building on the CPU with the same seed.
    manual_seed(7);
    let (c1, c2) = (Linear::new(8, 16)?, Linear::new(16, 4)?);
    let want: Vec<Tensor> = c1
        .parameters()
        .into_iter()
        .chain(c2.parameters())
        .map(|p| p.tensor())
        .collect();
    for (p, w) in params.iter().zip(&want) {
        assert_eq!(bits(&p.tensor())?, bits(w)?);
    }
    let loss = l2.call(&l1.call(&Tensor::randn([5, 8])?)?.relu()?)?.pow(2.0)?.mean()?;
    loss.backward()?;
    opt.step()?;
    assert!(params.iter().all(|p| p.grad_opt().is_some()));
    // to_empty reaches every submodule.
    let net = {
        let _meta = default_device_scope(Device::Meta);
        Sequential::new()
            .push(Linear::new(3, 3)?)
            .push(ReLU::new())
            .push(Linear::new(3, 2)?)
    };
    net.to_empty(Device::Cpu)?;
    assert!(net.parameters().iter().all(|p| p.tensor().device() == Device::Cpu));
    Ok(())
}
