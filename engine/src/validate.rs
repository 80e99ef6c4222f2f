//! Contract checks on everything that enters the engine. Each error names the field at fault,
//! in the WIT's terms, so a host can point its user at the bad input. The bounds on what a
//! real observation can show are [`tandem_api::bounds`]'s, which adapters run up front too.

use std::collections::HashSet;
use std::fmt;

use rustc_hash::FxHashSet;
use tandem_api::{
    ClusterChange, EngineError, Gpu, GpuSpec, Job, ModelSummary, Outcome, Policy, Profile, bounds,
};

use crate::Result;

fn invalid(message: String) -> EngineError {
    EngineError::InvalidInput(message)
}

/// Where a value sits in a call, in the WIT's terms (`queue[3].profile.gpu-util-pct`). Built
/// as a chain of borrowed parts and spelled out only for an error: a request of hundreds of
/// records is checked on every decision, and formatting each path up front cost more than
/// the checks.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Field<'a> {
    /// A parameter of the call, optionally indexed: `job`, `queue[3]`.
    Param(&'static str, Option<usize>),
    /// A member of another field, optionally indexed: `….profile`, `….residents[0]`.
    Member(&'a Field<'a>, &'static str, Option<usize>),
}

impl<'a> Field<'a> {
    /// A parameter of the call.
    pub(crate) const fn param(name: &'static str) -> Self {
        Self::Param(name, None)
    }

    /// An item of a list parameter.
    pub(crate) const fn item(name: &'static str, index: usize) -> Self {
        Self::Param(name, Some(index))
    }

    /// A member of this field.
    fn member(&'a self, name: &'static str) -> Field<'a> {
        Field::Member(self, name, None)
    }

    /// An item of a list member of this field.
    fn member_item(&'a self, name: &'static str, index: usize) -> Field<'a> {
        Field::Member(self, name, Some(index))
    }
}

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, index) = match self {
            Self::Param(name, index) => (name, index),
            Self::Member(parent, name, index) => {
                write!(f, "{parent}.")?;
                (name, index)
            }
        };
        f.write_str(name)?;
        match index {
            Some(i) => write!(f, "[{i}]"),
            None => Ok(()),
        }
    }
}

pub(crate) fn policy(policy: &Policy) -> Result<()> {
    if policy.max_jobs_per_gpu == 0 {
        return Err(invalid("policy.max-jobs-per-gpu must be at least 1".into()));
    }
    if !(0.0..=1.0).contains(&policy.exploration) {
        return Err(invalid(format!(
            "policy.exploration must be within 0..=1, got {}",
            policy.exploration
        )));
    }
    for (i, cap) in policy.model_caps.iter().enumerate() {
        if cap.gpu_model.is_empty() {
            return Err(invalid(format!(
                "policy.model-caps[{i}].gpu-model is empty"
            )));
        }
        if cap.max_jobs == 0 {
            return Err(invalid(format!(
                "policy.model-caps[{i}].max-jobs must be at least 1 (model {})",
                cap.gpu_model
            )));
        }
        if policy.model_caps[..i]
            .iter()
            .any(|c| c.gpu_model == cap.gpu_model)
        {
            return Err(invalid(format!(
                "policy.model-caps[{i}]: a second cap for GPU model {}",
                cap.gpu_model
            )));
        }
    }
    Ok(())
}

pub(crate) fn job_id(id: &str, field: &Field<'_>) -> Result<()> {
    if id.is_empty() {
        return Err(invalid(format!("{field} is empty")));
    }
    Ok(())
}

/// A profile in a request or a change: percentages 0..=100, and memory at most the largest
/// GPU's ([`bounds::LARGEST_GPU_MEMORY_MIB`]; which GPU the profile was measured on is judged
/// where it is observed, [`observed_profile`]: requests are checked on every decision).
pub(crate) fn profile(profile: &Profile, field: &Field<'_>) -> Result<()> {
    bounds::profile(profile, bounds::LARGEST_GPU_MEMORY_MIB, field)?;
    if profile.gpu_model.is_empty() {
        return Err(invalid(format!("{field}.gpu-model is empty")));
    }
    Ok(())
}

/// A profile `observe-profile` files: [`profile`]'s checks, and memory at most what a GPU of
/// its model has, `memory_limit_mib`.
pub(crate) fn observed_profile(
    profile: &Profile,
    memory_limit_mib: u32,
    field: &Field<'_>,
) -> Result<()> {
    self::profile(profile, field)?;
    bounds::memory(
        profile.mem_used_mib,
        memory_limit_mib,
        field.member("mem-used-mib"),
    )?;
    Ok(())
}

/// A non-negative, finite figure.
fn non_negative(value: f64, field: &Field<'_>) -> Result<()> {
    if !(value.is_finite() && value >= 0.0) {
        return Err(invalid(format!(
            "{field} must be finite and not negative, got {value}"
        )));
    }
    Ok(())
}

pub(crate) fn model_summary(summary: &ModelSummary, field: &Field<'_>) -> Result<()> {
    Ok(bounds::model_summary(summary, field)?)
}

pub(crate) fn gpu_spec(spec: &GpuSpec, field: &Field<'_>) -> Result<()> {
    if spec.memory_mib == 0 {
        return Err(invalid(format!("{field}.memory-mib must be positive")));
    }
    if spec.memory_mib > bounds::LARGEST_GPU_MEMORY_MIB {
        return Err(invalid(format!(
            "{field}.memory-mib is {} MiB, more than any GPU has (at most {} MiB)",
            spec.memory_mib,
            bounds::LARGEST_GPU_MEMORY_MIB
        )));
    }
    if spec.model.is_empty() {
        return Err(invalid(format!("{field}.model is empty")));
    }
    for (name, value) in [
        ("mem-bandwidth-gbps", spec.mem_bandwidth_gbps),
        ("price-per-hour", spec.price_per_hour),
        ("power-watts", spec.power_watts),
    ] {
        if let Some(value) = value {
            non_negative(f64::from(value), &field.member(name))?;
        }
    }
    Ok(())
}

pub(crate) fn speed(speed: f64, field: &Field<'_>) -> Result<()> {
    Ok(bounds::speed(speed, field)?)
}

pub(crate) fn job(job: &Job, field: &Field<'_>) -> Result<()> {
    job_id(&job.id, &field.member("id"))?;
    if let Some(p) = &job.profile {
        profile(p, &field.member("profile"))?;
    }
    if let Some(summary) = &job.declared {
        model_summary(summary, &field.member("declared"))?;
    }
    if let Some(work) = job.work {
        bounds::work(work, field.member("work"))?;
    }
    bounds::submitted_at(job.submitted_at_s, field.member("submitted-at-s"))?;
    Ok(())
}

/// Checks a queue and the GPUs it may use: ids unique across queue and residents, GPUs sane.
pub(crate) fn request(queue: &[Job], gpus: &[Gpu]) -> Result<()> {
    let residents: usize = gpus.iter().map(|g| g.residents.len()).sum();
    // Every id of every request is hashed here (with SipHash, 2% of the simulator's replay);
    // the ids come from the host, against which a keyed hash guards nothing.
    let mut job_ids =
        FxHashSet::with_capacity_and_hasher(queue.len() + residents, Default::default());
    for (i, queued) in queue.iter().enumerate() {
        let field = Field::item("queue", i);
        job(queued, &field)?;
        if !job_ids.insert(queued.id.as_str()) {
            return Err(invalid(format!("{field}.id `{}` is duplicated", queued.id)));
        }
    }
    let mut gpu_ids = FxHashSet::with_capacity_and_hasher(gpus.len(), Default::default());
    for (g, gpu) in gpus.iter().enumerate() {
        let field = Field::item("gpus", g);
        if gpu.id.is_empty() {
            return Err(invalid(format!("{field}.id is empty")));
        }
        if !gpu_ids.insert(gpu.id.as_str()) {
            return Err(invalid(format!("{field}.id `{}` is duplicated", gpu.id)));
        }
        gpu_spec(&gpu.spec, &field.member("spec"))?;
        for (r, resident) in gpu.residents.iter().enumerate() {
            let field = field.member_item("residents", r);
            job(resident, &field)?;
            if !job_ids.insert(resident.id.as_str()) {
                return Err(invalid(format!(
                    "{field}.id `{}` also appears elsewhere in the request",
                    resident.id
                )));
            }
        }
    }
    Ok(())
}

/// Checks the records one change to the cluster view carries (`changes[i]`). Unlike a
/// request, the view may hold one job id on several GPUs (a job of several GPUs, or runs of
/// one recurring job).
pub(crate) fn change(change: &ClusterChange, i: usize) -> Result<()> {
    match change {
        ClusterChange::SetGpu(entry) => {
            let change = Field::item("changes", i);
            let set_gpu = change.member("set-gpu");
            let field = set_gpu.member("gpu");
            let gpu = &entry.gpu;
            if gpu.id.is_empty() {
                return Err(invalid(format!("{field}.id is empty")));
            }
            if gpu.node.is_empty() {
                return Err(invalid(format!("{field}.node is empty")));
            }
            gpu_spec(&gpu.spec, &field.member("spec"))?;
            for (r, resident) in gpu.residents.iter().enumerate() {
                job(resident, &field.member_item("residents", r))?;
            }
        }
        ClusterChange::Bind(binding) => {
            let change = Field::item("changes", i);
            job(&binding.job, &change.member("bind").member("job"))?;
        }
        ClusterChange::Unbind(unbinding) => {
            let change = Field::item("changes", i);
            job_id(&unbinding.job, &change.member("unbind").member("job"))?;
        }
        ClusterChange::RemoveGpu(_) | ClusterChange::Clear => {}
    }
    Ok(())
}

pub(crate) fn outcome(outcome: &Outcome) -> Result<()> {
    let n = outcome.jobs.len();
    if n < 2 {
        return Err(invalid(format!(
            "outcome.jobs must name at least two co-located jobs, got {n}"
        )));
    }
    if outcome.gpu_model.is_empty() {
        return Err(invalid("outcome.gpu-model is empty".into()));
    }
    for (field, list) in [
        ("outcome.solo-s", &outcome.solo_s),
        ("outcome.colocated-s", &outcome.colocated_s),
    ] {
        if list.len() != n {
            return Err(invalid(format!(
                "{field} has {} entries but outcome.jobs has {n}",
                list.len()
            )));
        }
    }
    bounds::outcome(outcome)?;
    let mut seen = HashSet::new();
    for (i, id) in outcome.jobs.iter().enumerate() {
        let outcome = Field::param("outcome");
        job_id(id, &outcome.member_item("jobs", i))?;
        if !seen.insert(id) {
            return Err(invalid(format!("outcome.jobs[{i}] `{id}` is duplicated")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tandem_api::GpuSpec;

    use super::*;

    fn profile_of(util: f32) -> Profile {
        Profile {
            gpu_util_pct: util,
            mem_access_pct: 10.0,
            mem_used_mib: 100,
            gpu_model: "V100".into(),
        }
    }

    #[test]
    fn nan_and_out_of_range_percentages_name_their_field() {
        for bad in [f32::NAN, -1.0, 100.5] {
            let queued = Field::item("queue", 0);
            let err = profile(&profile_of(bad), &queued.member("profile")).unwrap_err();
            assert!(
                err.to_string().contains("queue[0].profile.gpu-util-pct"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_resident_may_not_also_be_queued() {
        let gpus = [Gpu {
            id: "g".into(),
            node: "n".into(),
            spec: GpuSpec::new("V100", 100),
            residents: vec![Job::new("a")],
        }];
        let err = request(&[Job::new("a")], &gpus).unwrap_err();
        assert!(
            err.to_string().contains("gpus[0].residents[0].id `a`"),
            "{err}"
        );
    }

    #[test]
    fn outcome_lists_must_match_and_be_positive() {
        let mut o = Outcome {
            gpu_model: "V100".into(),
            jobs: vec!["a".into(), "b".into()],
            solo_s: vec![100.0, 80.0],
            colocated_s: vec![130.0],
        };
        assert!(
            outcome(&o)
                .unwrap_err()
                .to_string()
                .contains("outcome.colocated-s has 1")
        );
        o.colocated_s = vec![130.0, -1.0];
        assert!(
            outcome(&o)
                .unwrap_err()
                .to_string()
                .contains("outcome.colocated-s[1]")
        );
        o.colocated_s = vec![130.0, 95.0];
        assert_eq!(outcome(&o), Ok(()));
    }
}
