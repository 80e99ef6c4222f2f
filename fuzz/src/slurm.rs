//! The Slurm adapter's `key=value` bodies (`submit`, `start`, `finish`, from the job_submit
//! hook and the SPANK plugin), read with `tandem_slurm_adapter::http::Fields`: any body is a
//! set of fields or a `400` naming the verb, and so is the submission read from the fields,
//! a `finish`'s job, run time and user, and a `start`'s placement token.

use tandem_adapter_core::http::Failure;
use tandem_slurm_adapter::http::Fields;

/// Feeds one input to the target.
pub fn run(body: &[u8]) {
    match Fields::parse("submit", body) {
        Ok(fields) => {
            if let Err(failure) = fields.submission("submit") {
                refused(&failure);
            }
            if let Err(failure) = fields.number::<u32>("submit", "job") {
                refused(&failure);
            }
            if let Err(failure) = fields.number::<f64>("submit", "elapsed") {
                refused(&failure);
            }
            // A `finish` names the job's user; a `start` may carry a placement token.
            if let Err(failure) = fields.number::<u32>("submit", "uid") {
                refused(&failure);
            }
            if let Some(token) = fields.get("token") {
                let _ = tandem_slurm_adapter::app::is_token(token);
            }
        }
        Err(failure) => refused(&failure),
    }
}

fn refused(failure: &Failure) {
    assert_eq!(failure.status, 400, "{}", failure.message);
    assert!(
        failure.message.starts_with("invalid submit request: "),
        "the refusal does not name the verb: {}",
        failure.message
    );
}
