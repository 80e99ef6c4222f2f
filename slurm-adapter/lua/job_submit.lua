--[[
Tandem's placement hook for slurmctld (job_submit/lua).

Why job_submit.lua and not cli_filter.lua: it runs in slurmctld for every submission, whatever
client sent it (sbatch, srun, salloc, the REST API), so users cannot skip it, and only the
controller host needs the service's address. It runs under slurmctld's locks, so it does one
short HTTP request with a hard time limit and fails open: whenever the service is down, slow or
answers anything unexpected, the job is submitted unchanged and a warning is logged.

For a job submitted with --tandem (the SPANK plugin passes it as TANDEM in the job-control
environment, with --tandem-name and what the job declares: --tandem-priority, --tandem-work,
--tandem-model, --tandem-batch-size) it asks tandem-slurm-adapter where the job should run and:
  - place NODE INDEX TOKEN: sets the job's node list to NODE, and (batch jobs) TANDEM_PLACEMENT
    in its environment, with which the SPANK plugin claims the GPU on the node;
  - refuse REASON: refuses the job with the reason (its memory fits no GPU, or a declaration
    the service refuses, named by its option);
  - pass REASON: leaves the job as it is.

Every request carries a fresh MUNGE credential whose payload is the request itself
("POST /v1/slurm/submit\n" and the body), so the service knows it comes from slurmctld
(SlurmUser) and that it was made for this request; munged refuses a credential decoded twice.
Where the cluster has no munged, the hook speaks HTTPS (LuaSec) and presents a client
certificate instead (TANDEM_AUTH=certificate with TANDEM_TLS_*): LuaSec checks the service's
certificate against TANDEM_TLS_CA but not its name, so that CA must sign the service's
certificate only.

Install: copy to the directory of slurm.conf as job_submit.lua, set JobSubmitPlugins=lua, and
set these below (or in slurmctld's environment):
  TANDEM_SERVICE       HOST:PORT of the service (127.0.0.1:8889)
  TANDEM_TIMEOUT       seconds the hook waits for the credential and the answer (0.3)
  TANDEM_AUTH          munge (the default), certificate (a service run with --auth
                       client-certificate), or none (one run with --insecure-open-verbs)
  TANDEM_MUNGE         munge's `munge` (munge)
  TANDEM_MUNGE_SOCKET  munged's socket, if not munge's default
  TANDEM_TLS_CA        the service's CA (PEM): HTTPS when set
  TANDEM_TLS_CERT      the hook's client certificate (PEM), with TANDEM_TLS_KEY its key
Needs LuaSocket (Debian: lua-socket), and munge's client and coreutils' `timeout` (MUNGE) or
LuaSec (Debian: lua-sec; HTTPS).
]]

local TANDEM_SERVICE = os.getenv("TANDEM_SERVICE") or "127.0.0.1:8889"
-- Longest the hook waits for the service, in seconds: slurmctld holds its locks meanwhile.
local TANDEM_TIMEOUT = tonumber(os.getenv("TANDEM_TIMEOUT") or "") or 0.3
local TANDEM_AUTH = os.getenv("TANDEM_AUTH") or "munge"
local TANDEM_MUNGE = os.getenv("TANDEM_MUNGE") or "munge"
local TANDEM_MUNGE_SOCKET = os.getenv("TANDEM_MUNGE_SOCKET")
local TANDEM_TLS_CA = os.getenv("TANDEM_TLS_CA")
local TANDEM_TLS_CERT = os.getenv("TANDEM_TLS_CERT")
local TANDEM_TLS_KEY = os.getenv("TANDEM_TLS_KEY")
-- The largest request the hook sends: munge gets its payload on its command line.
local MAX_REQUEST = 32768

local have_socket, socket = pcall(require, "socket")
local have_ssl, ssl = pcall(require, "ssl")

-- The value of KEY in a job's spank_job_env (a table of "KEY=VALUE" strings).
local function spank_env(job_desc, key)
   local env = job_desc.spank_job_env
   if env == nil then
      return nil
   end
   local prefix = key .. "="
   for _, entry in pairs(env) do
      if type(entry) == "string" and entry:sub(1, #prefix) == prefix then
         return entry:sub(#prefix + 1)
      end
   end
   return nil
end

-- TEXT quoted for sh: inside single quotes nothing is special but the quote itself.
local function quoted(text)
   return "'" .. text:gsub("'", "'\\''") .. "'"
end

-- The "Authorization: ..." header line for a request whose payload is PAYLOAD, or "" when the
-- service is open; nil and why when no credential could be made.
local function authorization(payload)
   if TANDEM_AUTH == "none" then
      return ""
   elseif TANDEM_AUTH == "certificate" then
      if TANDEM_TLS_CA == nil or TANDEM_TLS_CERT == nil or TANDEM_TLS_KEY == nil then
         return nil, "TANDEM_AUTH=certificate needs TANDEM_TLS_CA, TANDEM_TLS_CERT and TANDEM_TLS_KEY"
      end
      return ""
   elseif TANDEM_AUTH ~= "munge" then
      return nil, "TANDEM_AUTH is " .. TANDEM_AUTH .. " (expected munge, certificate or none)"
   end
   if #payload > MAX_REQUEST then
      return nil, "the request is larger than " .. MAX_REQUEST .. " bytes"
   end
   -- `timeout` bounds munge, so that a stuck munged cannot hold slurmctld's locks; `exec`
   -- spares the shell's own fork.
   local command = "exec timeout " .. TANDEM_TIMEOUT .. " " .. quoted(TANDEM_MUNGE) .. " -s " .. quoted(payload)
   if TANDEM_MUNGE_SOCKET ~= nil then
      command = command .. " -S " .. quoted(TANDEM_MUNGE_SOCKET)
   end
   local pipe = io.popen(command .. " 2>&1", "r")
   if pipe == nil then
      return nil, "cannot run " .. TANDEM_MUNGE
   end
   local out = pipe:read("*a") or ""
   pipe:close()
   local credential = out:match("^(MUNGE:[%w+/=]+:)%s*$")
   if credential == nil then
      return nil, "no MUNGE credential from " .. TANDEM_MUNGE .. ": " .. out:gsub("%s+$", "")
   end
   return "Authorization: MUNGE " .. credential .. "\r\n"
end

-- POSTs BODY to PATH; returns the answer's body, or nil and why, and the milliseconds it took
-- (the credential included).
local function post(path, body)
   if not have_socket then
      return nil, "LuaSocket is not installed (Debian: lua-socket)"
   end
   local host, port = TANDEM_SERVICE:match("^(.+):(%d+)$")
   if host == nil then
      return nil, "TANDEM_SERVICE is not HOST:PORT"
   end
   local started = socket.gettime()
   local header, why = authorization("POST " .. path .. "\n" .. body)
   if header == nil then
      return nil, why
   end
   local tcp = socket.tcp()
   -- What munge took counts against the whole call's limit.
   local left = TANDEM_TIMEOUT - (socket.gettime() - started)
   if left <= 0 then
      tcp:close()
      return nil, "no MUNGE credential within " .. TANDEM_TIMEOUT .. " s"
   end
   tcp:settimeout(left, "t")
   local ok, err = tcp:connect(host, tonumber(port))
   if not ok then
      tcp:close()
      return nil, "cannot connect to " .. TANDEM_SERVICE .. ": " .. tostring(err)
   end
   if TANDEM_TLS_CA ~= nil then
      if not have_ssl then
         tcp:close()
         return nil, "LuaSec is not installed (Debian: lua-sec)"
      end
      local tls, werr = ssl.wrap(tcp, {
         mode = "client", protocol = "any", verify = "peer", cafile = TANDEM_TLS_CA,
         certificate = TANDEM_TLS_CERT, key = TANDEM_TLS_KEY,
         options = { "all", "no_sslv2", "no_sslv3", "no_tlsv1", "no_tlsv1_1" },
      })
      if tls == nil then
         tcp:close()
         return nil, "cannot set up TLS: " .. tostring(werr)
      end
      tcp = tls
      -- A negative timeout would be none at all.
      tcp:settimeout(math.max(0.001, TANDEM_TIMEOUT - (socket.gettime() - started)), "t")
      ok, err = tcp:dohandshake()
      if not ok then
         tcp:close()
         return nil, "no TLS with " .. TANDEM_SERVICE .. ": " .. tostring(err)
      end
   end
   ok, err = tcp:send("POST " .. path .. " HTTP/1.0\r\nHost: " .. TANDEM_SERVICE .. "\r\n" ..
      header .. "Content-Type: text/plain\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body)
   if not ok then
      tcp:close()
      return nil, "cannot send to " .. TANDEM_SERVICE .. ": " .. tostring(err)
   end
   local answer, rerr, partial = tcp:receive("*a")
   tcp:close()
   answer = answer or partial
   if answer == nil or (rerr ~= nil and rerr ~= "closed") then
      return nil, "no answer from " .. TANDEM_SERVICE .. " within " .. TANDEM_TIMEOUT .. " s: " .. tostring(rerr)
   end
   local status = answer:match("^HTTP/%d%.%d (%d+)")
   local text = answer:match("\r\n\r\n(.*)$") or ""
   if status ~= "200" then
      return nil, "the service answered " .. tostring(status) .. ": " .. text
   end
   return text, nil, (socket.gettime() - started) * 1000
end

function slurm_job_submit(job_desc, part_list, submit_uid)
   local objective = spank_env(job_desc, "TANDEM")
   if objective == nil then
      return slurm.SUCCESS
   end
   local body = "uid=" .. tostring(job_desc.user_id or submit_uid) .. "\n"
   if objective ~= "default" then
      body = body .. "objective=" .. objective .. "\n"
   end
   local name = spank_env(job_desc, "TANDEM_NAME")
   if name ~= nil then
      body = body .. "name=" .. name .. "\n"
   end
   -- What the job declared (--tandem-priority, --tandem-work, --tandem-model,
   -- --tandem-batch-size); the SPANK plugin lets only one-line values through.
   for key, variable in pairs({ priority = "TANDEM_PRIORITY", work = "TANDEM_WORK",
                                model = "TANDEM_MODEL", ["batch-size"] = "TANDEM_BATCH_SIZE" }) do
      local value = spank_env(job_desc, variable)
      if value ~= nil and not value:find("[\r\n]") then
         body = body .. key .. "=" .. value .. "\n"
      end
   end
   local answer, err, ms = post("/v1/slurm/submit", body)
   if answer == nil then
      slurm.log_info("tandem: WARNING: submitted unchanged (fail-open): %s", err)
      return slurm.SUCCESS
   end
   local verb, rest = answer:match("^(%a+)%s*(.-)%s*$")
   if verb == "place" then
      local node, index, token = rest:match("^(%S+) (%d+) (%S+)$")
      if node == nil then
         slurm.log_info("tandem: WARNING: submitted unchanged (fail-open): unreadable answer")
         return slurm.SUCCESS
      end
      job_desc.req_nodes = node
      if job_desc.script ~= nil then
         job_desc.environment.TANDEM_PLACEMENT = token
      end
      slurm.log_info("tandem: placed on %s GPU %s in %.3f ms", node, index, ms)
      return slurm.SUCCESS
   elseif verb == "refuse" then
      slurm.log_info("tandem: refused a job in %.3f ms", ms)
      slurm.log_user("tandem: %s", rest)
      return slurm.ERROR
   end
   slurm.log_info("tandem: left unchanged in %.3f ms: %s", ms, rest or "")
   return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
   return slurm.SUCCESS
end

return slurm.SUCCESS
