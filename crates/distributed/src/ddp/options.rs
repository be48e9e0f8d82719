//! DDP's keyword arguments and communication hooks.

/// How each bucket is communicated (`register_comm_hook` with PyTorch's
/// `default_hooks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommHook {
    /// All-reduce of the bucket, gradients divided by the world size as
    /// they fill it (DDP's default, and `allreduce_hook`).
    AllReduce,
    /// `fp16_compress_hook`: the bucket cast to float16 and divided by the
    /// world size, all-reduced, cast back.
    Fp16Compress,
    /// `bf16_compress_hook`: as `Fp16Compress` in bfloat16.
    Bf16Compress,
}

/// DDP's keyword arguments.
#[derive(Debug, Clone, Copy)]
pub struct DdpOptions {
    /// Bucket size in MiB (PyTorch's default 25; the first bucket is 1 MiB).
    pub bucket_cap_mb: f64,
    /// Broadcast the module's buffers from rank 0 before each forward.
    pub broadcast_buffers: bool,
    /// Find the parameters a forward did not use, so their buckets do not
    /// wait for gradients that never come.
    pub find_unused_parameters: bool,
    /// The set of used parameters is the same every iteration: found once.
    pub static_graph: bool,
    /// After the first iteration, `.grad` of each parameter is a view into
    /// its bucket (no second copy of the gradients).
    pub gradient_as_bucket_view: bool,
    /// How buckets are communicated.
    pub comm_hook: CommHook,
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            bucket_cap_mb: 25.0,
            broadcast_buffers: true,
            find_unused_parameters: false,
            static_graph: false,
            gradient_as_bucket_view: false,
            comm_hook: CommHook::AllReduce,
        }
    }
}

impl DdpOptions {
    /// Sets `bucket_cap_mb`.
    pub fn bucket_cap_mb(mut self, mb: f64) -> Self {
        self.bucket_cap_mb = mb;
        self
    }
    /// Sets `broadcast_buffers`.
    pub fn broadcast_buffers(mut self, v: bool) -> Self {
        self.broadcast_buffers = v;
        self
    }
    /// Sets `find_unused_parameters`.
    pub fn find_unused_parameters(mut self, v: bool) -> Self {
        self.find_unused_parameters = v;
        self
    }
    /// Sets `static_graph`.
    pub fn static_graph(mut self, v: bool) -> Self {
        self.static_graph = v;
        self
    }
    /// Sets `gradient_as_bucket_view`.
    pub fn gradient_as_bucket_view(mut self, v: bool) -> Self {
        self.gradient_as_bucket_view = v;
        self
    }
    /// Sets the communication hook.
    pub fn comm_hook(mut self, h: CommHook) -> Self {
        self.comm_hook = h;
        self
    }
}
