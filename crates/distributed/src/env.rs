//! Where a process learns its rank: the variables of torchrun (and
//! `ferrorun`), of mpirun (Open MPI, MPICH / Intel MPI's PMI) and of
//! Slurm's srun, read in that order.

use crate::error::{DistError, Result};

/// What the launcher told this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    /// Global rank.
    pub rank: usize,
    /// Number of processes in the job.
    pub world_size: usize,
    /// Rank among the processes of this host.
    pub local_rank: usize,
    /// Number of processes on this host.
    pub local_world_size: usize,
    /// The store's host (`MASTER_ADDR`), when given.
    pub master_addr: Option<String>,
    /// The store's port (`MASTER_PORT`), when given.
    pub master_port: Option<u16>,
    /// Which launcher's variables these were: `"torchrun"`, `"openmpi"`,
    /// `"pmi"` or `"slurm"`.
    pub source: &'static str,
    /// torchrun's agent runs the store (`TORCHELASTIC_USE_AGENT_STORE`):
    /// the workers only connect to it, under `/worker/attempt_<restart>`.
    pub agent_store_attempt: Option<u64>,
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

fn num(name: &str) -> Result<Option<usize>> {
    var(name)
        .map(|v| {
            v.trim().parse::<usize>().map_err(|_| {
                DistError::InvalidArgument(format!("the environment variable {name}={v:?} is not a number"))
            })
        })
        .transpose()
}

impl LaunchEnv {
    /// Reads the launcher's variables; `None` when no launcher set a rank.
    /// Errors for variables that are set but malformed or inconsistent.
    pub fn detect() -> Result<Option<LaunchEnv>> {
        // (source, rank, size, local rank, local size)
        let schemes: [(&str, &str, &str, &str, &str); 4] = [
            ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"),
            (
                "openmpi",
                "OMPI_COMM_WORLD_RANK",
                "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK",
                "OMPI_COMM_WORLD_LOCAL_SIZE",
            ),
            ("pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
            (
                "slurm",
                "SLURM_PROCID",
                "SLURM_NTASKS",
                "SLURM_LOCALID",
                "SLURM_NTASKS_PER_NODE",
            ),
        ];
        for (source, rank, size, local, local_size) in schemes {
            let Some(r) = num(rank)? else { continue };
            let n = num(size)?.ok_or_else(|| DistError::InvalidArgument(format!("{rank} is set but {size} is not")))?;
            if r >= n {
                return Err(DistError::InvalidArgument(format!(
                    "{rank}={r} is not below {size}={n}"
                )));
            }
            let local_rank = num(local)?.unwrap_or(0);
            let local_world_size = num(local_size)?.unwrap_or(1).max(local_rank + 1);
            let master_port = var("MASTER_PORT")
                .map(|p| {
                    p.trim()
                        .parse::<u16>()
                        .map_err(|_| DistError::InvalidArgument(format!("MASTER_PORT={p:?} is not a port number")))
                })
                .transpose()?;
            let agent = var("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
            let agent_store_attempt = if agent {
                Some(num("TORCHELASTIC_RESTART_COUNT")?.unwrap_or(0) as u64)
            } else {
                None
            };
            return Ok(Some(LaunchEnv {
                rank: r,
                world_size: n,
                local_rank,
                local_world_size,
                master_addr: var("MASTER_ADDR"),
                master_port,
                source,
                agent_store_attempt,
            }));
        }
        Ok(None)
    }

    /// Whether every process of the job is on this host.
    pub fn single_host(&self) -> bool {
        self.local_world_size == self.world_size
    }
}

/// This process's rank on its host (`LOCAL_RANK` or the MPI / Slurm
/// equivalent); 0 when no launcher set one.
pub fn local_rank() -> usize {
    LaunchEnv::detect().ok().flatten().map_or(0, |e| e.local_rank)
}
