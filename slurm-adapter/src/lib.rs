//! Tandem inside Slurm.
//!
//! Slurm has three places Tandem can act, and this crate serves all of them from one service
//! on the controller host, a front-end on [`tandem_adapter_core`] (which holds the engine, the
//! knowledge base, the intake and the metrics):
//!
//! - **Submission** (`slurm-adapter/lua/job_submit.lua`, run by slurmctld's `job_submit/lua`
//!   plugin): for a job that asks for Tandem, the hook posts to [`http`]'s `submit` verb and
//!   sets the job's node from the answer, or refuses a job whose memory fits no GPU. SPANK
//!   cannot choose nodes (it runs in clients and on compute nodes), so placement has to happen
//!   here.
//! - **Start and exit** (`slurm-adapter/spank`, the SPANK plugin, in slurmstepd): the job asks
//!   which GPU of its node it gets (`start`), and reports its run time when it ends (`finish`),
//!   from which the core estimates co-location outcomes.
//! - **The cluster**: GPU nodes are read from Slurm itself, `scontrol show node -o` ([`nodes`]).
//!
//! Every verb is Slurm's own: job_submit.lua and the plugin prove it with a MUNGE credential
//! bound to each request, or a client certificate ([`auth`]); a placement's token is random
//! and taken only by a job of the user it was made for.
//!
//! Identities are keyed before they reach the engine ([`identity`]): the engine and the stored
//! knowledge base see HMACs of `slurm-uid-<uid>/<name>`, where the name is what the user chose
//! with `--tandem-name`, never a job name, script or command.

pub mod app;
pub mod auth;
pub mod http;
pub mod identity;
pub mod models;
pub mod nodes;
pub mod profilers;

mod options;
mod run;

pub use options::Options;
pub use run::run;
