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

Install: copy to the directory of slurm.conf as job_submit.lua, set JobSubmitPlugins=lua, and
set TANDEM_SERVICE below (or in slurmctld's environment) if the service is not on 127.0.0.1:8889.
Needs LuaSocket (Debian: lua-socket).
]]

local TANDEM_SERVICE = os.getenv("TANDEM_SERVICE") or "127.0.0.1:8889"
-- Longest the hook waits for the service, in seconds: slurmctld holds its locks meanwhile.
local TANDEM_TIMEOUT = tonumber(os.getenv("TANDEM_TIMEOUT") or "") or 0.3

local have_socket, socket = pcall(require, "socket")

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

-- POSTs BODY to PATH; returns the answer's body, or nil and why.
local function post(path, body)
   if not have_socket then
      return nil, "LuaSocket is not installed (Debian: lua-socket)"
   end
   local host, port = TANDEM_SERVICE:match("^(.+):(%d+)$")
   if host == nil then
      return nil, "TANDEM_SERVICE is not HOST:PORT"
   end
   local started = socket.gettime()
   local tcp = socket.tcp()
   tcp:settimeout(TANDEM_TIMEOUT, "t")
   local ok, err = tcp:connect(host, tonumber(port))
   if not ok then
      tcp:close()
      return nil, "cannot connect to " .. TANDEM_SERVICE .. ": " .. tostring(err)
   end
   ok, err = tcp:send("POST " .. path .. " HTTP/1.0\r\nHost: " .. TANDEM_SERVICE ..
      "\r\nContent-Type: text/plain\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body)
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
