//! The SPANK callbacks Slurm calls, and the few SPANK functions they use. Every `unsafe` of
//! the plugin is here.

use super::*;

/// Logs `message` through Slurm (`error` goes to the user's terminal in `srun`/`sbatch`).
fn log(error: bool, message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // SAFETY: the format is a literal "%s" with exactly one C-string argument, which lives
    // until the call returns.
    unsafe {
        if error {
            spank_sys::slurm_error(c"%s".as_ptr(), text.as_ptr());
        } else {
            spank_sys::slurm_info(c"%s".as_ptr(), text.as_ptr());
        }
    }
}

fn context() -> spank_sys::spank_context_t {
    // SAFETY: takes no arguments; valid in every callback.
    unsafe { spank_sys::spank_context() }
}

fn item_u32(spank: spank_sys::spank_t, item: spank_sys::spank_item) -> Option<u32> {
    let mut value: u32 = 0;
    // SAFETY: `spank` is the handle Slurm passed to the running callback; the items asked
    // (S_JOB_ID, S_JOB_STEPID, S_JOB_UID) take one pointer to a 32-bit integer, as given.
    let status = unsafe { spank_sys::spank_get_item(spank, item, &mut value as *mut u32) };
    (status == spank_sys::ESPANK_SUCCESS).then_some(value)
}

fn getenv(spank: spank_sys::spank_t, name: &CStr) -> Option<String> {
    let mut buffer = vec![0 as c_char; 4096];
    // SAFETY: `spank` is the running callback's handle; `buffer` holds `len` writable bytes
    // and spank_getenv writes a NUL-terminated value of at most that many.
    let status = unsafe {
        spank_sys::spank_getenv(
            spank,
            name.as_ptr(),
            buffer.as_mut_ptr(),
            buffer.len() as c_int,
        )
    };
    if status != spank_sys::ESPANK_SUCCESS {
        return None;
    }
    // SAFETY: on success the buffer holds a NUL-terminated string (it was zeroed, and the
    // last byte is never written past).
    let value = unsafe { CStr::from_ptr(buffer.as_ptr()) };
    Some(value.to_string_lossy().into_owned())
}

fn setenv(spank: spank_sys::spank_t, name: &CStr, value: &str) -> bool {
    let Ok(value) = CString::new(value) else {
        return false;
    };
    // SAFETY: `spank` is the running callback's handle; both strings are NUL-terminated and
    // outlive the call, which copies them.
    let status = unsafe { spank_sys::spank_setenv(spank, name.as_ptr(), value.as_ptr(), 1) };
    status == spank_sys::ESPANK_SUCCESS
}

fn job_control_setenv(spank: spank_sys::spank_t, name: &CStr, value: &str) -> bool {
    let Ok(value) = CString::new(value) else {
        return false;
    };
    // SAFETY: as for `setenv`; valid in local and allocator context, where it is called.
    let status =
        unsafe { spank_sys::spank_job_control_setenv(spank, name.as_ptr(), value.as_ptr(), 1) };
    status == spank_sys::ESPANK_SUCCESS
}

fn plugin_args<'a>(ac: c_int, argv: *const *const c_char) -> Vec<std::borrow::Cow<'a, str>> {
    if argv.is_null() {
        return Vec::new();
    }
    (0..ac.max(0) as usize)
        .filter_map(|i| {
            // SAFETY: Slurm passes `ac` valid pointers in `argv` (the plugstack.conf words
            // after the path), alive for the callback.
            let arg = unsafe { *argv.add(i) };
            // SAFETY: each is a NUL-terminated string, alive for the callback.
            (!arg.is_null()).then(|| unsafe { CStr::from_ptr(arg) }.to_string_lossy())
        })
        .collect()
}

/// Called by Slurm whenever one of the plugin's options is given (locally, or in slurmstepd
/// from the job's environment).
unsafe extern "C" fn option_given(val: c_int, optarg: *const c_char, _remote: c_int) -> c_int {
    let value = if optarg.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null `optarg` is the option's NUL-terminated value, alive for the call.
        unsafe { CStr::from_ptr(optarg) }
            .to_string_lossy()
            .into_owned()
    };
    with_state(|state| match val {
        OPT_TANDEM => state.tandem = Some(value),
        OPT_NAME => state.name = Some(value),
        declared if DECLARATIONS.iter().any(|d| d.0 == declared) => {
            state.declared.retain(|(v, _)| *v != declared);
            state.declared.push((declared, value));
        }
        _ => {}
    });
    0
}

fn register(
    spank: spank_sys::spank_t,
    name: &'static CStr,
    arginfo: &'static CStr,
    usage: &'static CStr,
    has_arg: c_int,
    val: c_int,
) -> bool {
    let mut option = spank_sys::spank_option {
        name: name.as_ptr(),
        arginfo: arginfo.as_ptr(),
        usage: usage.as_ptr(),
        has_arg,
        val,
        cb: Some(option_given),
    };
    // SAFETY: `spank` is slurm_spank_init's handle; the option's strings are 'static and
    // Slurm copies the struct.
    let status = unsafe { spank_sys::spank_option_register(spank, &mut option) };
    status == spank_sys::ESPANK_SUCCESS
}

/// Registers the options and reads the plugin's arguments.
///
/// # Safety
/// Called by Slurm with a valid handle and `ac` arguments in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn slurm_spank_init(
    spank: spank_sys::spank_t,
    ac: c_int,
    argv: *const *const c_char,
) -> c_int {
    let args = plugin_args(ac, argv);
    let config = match Config::parse(args.iter().map(AsRef::as_ref)) {
        Ok(config) => config,
        Err(message) => {
            log(true, &message);
            return -1;
        }
    };
    with_state(|state| state.config = config);
    // has_arg 2: the value is optional (`--tandem` or `--tandem=max-packing`).
    let registered = register(
        spank,
        c"tandem",
        c"objective",
        c"Share a GPU the way Tandem recommends (objective: balanced, min-slowdown or max-packing; the cluster's default if left out)",
        2,
        OPT_TANDEM,
    ) && register(
        spank,
        c"tandem-name",
        c"name",
        c"Name this recurring job for Tandem, so that what its earlier runs taught is used",
        1,
        OPT_NAME,
    );
    let registered = registered
        && DECLARATIONS
            .iter()
            .all(|&(val, name, arginfo, usage, _)| register(spank, name, arginfo, usage, 1, val));
    if registered {
        0
    } else {
        log(true, "tandem: cannot register the --tandem options");
        -1
    }
}

/// Validates the options at submission and hands them to slurmctld's job_submit.lua.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn slurm_spank_init_post_opt(
    spank: spank_sys::spank_t,
    _ac: c_int,
    _argv: *const *const c_char,
) -> c_int {
    let (tandem, name, declared) =
        with_state(|s| (s.tandem.clone(), s.name.clone(), s.declared.clone()));
    let option_of = |val: c_int| {
        DECLARATIONS
            .iter()
            .find(|d| d.0 == val)
            .map(|d| d.1.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let Some(objective) = tandem else {
        if name.is_some() {
            log(true, "--tandem-name: needs --tandem");
            return -1;
        }
        if let Some((val, _)) = declared.first() {
            log(true, &format!("--{}: needs --tandem", option_of(*val)));
            return -1;
        }
        return 0;
    };
    let checked = check_objective(Some(&objective))
        .and_then(|()| match &name {
            Some(name) => check_name(name),
            None => Ok(()),
        })
        .and_then(|()| {
            declared
                .iter()
                .try_for_each(|(val, value)| check_declared(&option_of(*val), value))
        });
    if let Err(message) = checked {
        log(true, &message);
        return -1;
    }
    let ctx = context();
    if ctx == spank_sys::spank_context_S_CTX_REMOTE {
        // Here slurmstepd still runs as root (user_init runs with the job's user's
        // privileges): the credential the service gets is root's, which is Slurm's.
        claim_gpu(spank, &objective, name.as_deref());
        return 0;
    }
    if ctx == spank_sys::spank_context_S_CTX_LOCAL
        || ctx == spank_sys::spank_context_S_CTX_ALLOCATOR
    {
        let value = if objective.is_empty() {
            "default"
        } else {
            &objective
        };
        let handed = job_control_setenv(spank, c"TANDEM", value)
            && name
                .as_deref()
                .is_none_or(|n| job_control_setenv(spank, c"TANDEM_NAME", n))
            && declared.iter().all(|(val, value)| {
                DECLARATIONS
                    .iter()
                    .find(|d| d.0 == *val)
                    .is_some_and(|d| job_control_setenv(spank, d.4, value))
            });
        if !handed {
            log(true, "tandem: cannot pass --tandem to slurmctld");
            return -1;
        }
    }
    0
}

/// Asks the service for the GPU of this node the job gets (remote context, as root).
fn claim_gpu(spank: spank_sys::spank_t, objective: &str, name: Option<&str>) {
    let config = with_state(|s| s.config.clone());
    let (Some(job), Some(step), Some(uid)) = (
        item_u32(spank, spank_sys::spank_item_S_JOB_ID),
        item_u32(spank, spank_sys::spank_item_S_JOB_STEPID),
        item_u32(spank, spank_sys::spank_item_S_JOB_UID),
    ) else {
        log(
            true,
            "tandem: cannot read the job's id; it keeps the GPU Slurm gave it",
        );
        return;
    };
    // Slurm's name for the node; the host name where slurmstepd does not set it (the usual
    // NodeName).
    let node = getenv(spank, c"SLURMD_NODENAME")
        .or_else(|| {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
            Some(host.trim().split('.').next().unwrap_or_default().to_owned())
        })
        .unwrap_or_default();
    let mut body = format!("job={job}\nnode={node}\nuid={uid}\n");
    if !objective.is_empty() {
        body.push_str(&format!("objective={objective}\n"));
    }
    if let Some(name) = name {
        body.push_str(&format!("name={name}\n"));
    }
    // The job's environment is its user's to set: the token is only a claim, which the
    // service grants only to a job of the user it was made for.
    if let Some(token) = getenv(spank, c"TANDEM_PLACEMENT") {
        body.push_str(&format!("token={token}\n"));
    }
    let asked = Instant::now();
    let grant = post(&config, "/v1/slurm/start", &body).and_then(|a| parse_grant(&a));
    match grant {
        Ok(Grant::Gpu(index, mps)) => {
            with_state(|s| {
                s.started = Some((job, step, uid, asked));
                s.grant = Some((index, mps));
            });
            set_gpu(spank, index, mps);
            log(
                false,
                &format!("tandem: job {job} runs on GPU {index} of {node}"),
            );
        }
        Ok(Grant::None(why)) => {
            with_state(|s| s.started = Some((job, step, uid, asked)));
            log(
                false,
                &format!("tandem: no GPU for job {job} ({why}); it keeps the GPU Slurm gave it"),
            );
        }
        Err(error) => log(
            true,
            &format!(
                "tandem: the service did not answer ({error}); job {job} keeps the GPU Slurm gave it"
            ),
        ),
    }
}

fn set_gpu(spank: spank_sys::spank_t, index: u32, mps: Option<u32>) {
    let mut set = setenv(spank, c"CUDA_VISIBLE_DEVICES", &index.to_string());
    if let Some(mps) = mps {
        set &= setenv(
            spank,
            c"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
            &mps.to_string(),
        );
    }
    if !set {
        log(true, "tandem: cannot set the job's CUDA_VISIBLE_DEVICES");
    }
}

/// Sets the granted GPU again in each task just before it runs, after Slurm's own GRES
/// environment, so Tandem's choice is the one the task sees.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn slurm_spank_task_init(
    spank: spank_sys::spank_t,
    _ac: c_int,
    _argv: *const *const c_char,
) -> c_int {
    if let Some((index, mps)) = with_state(|s| s.grant) {
        set_gpu(spank, index, mps);
    }
    0
}

/// Reports the run time of the job's main step (the batch script, or the one step of a job
/// started by `srun` alone) when it ends.
///
/// # Safety
/// Called by Slurm with a valid handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn slurm_spank_exit(
    spank: spank_sys::spank_t,
    _ac: c_int,
    _argv: *const *const c_char,
) -> c_int {
    if context() != spank_sys::spank_context_S_CTX_REMOTE {
        return 0;
    }
    let (config, started) = with_state(|s| (s.config.clone(), s.started));
    let Some((job, step, uid, at)) = started else {
        return 0;
    };
    // Steps a batch script starts with srun end before the script: only the script's end is
    // the job's.
    let inside_batch = getenv(spank, c"ENVIRONMENT").as_deref() == Some("BATCH");
    if step != BATCH_STEP && inside_batch {
        return 0;
    }
    let elapsed = at.elapsed().as_secs_f64();
    let body = format!("job={job}\nuid={uid}\nelapsed={elapsed:.3}\n");
    if let Err(error) = post(&config, "/v1/slurm/finish", &body) {
        log(
            true,
            &format!("tandem: cannot report the end of job {job}: {error}"),
        );
    }
    0
}
