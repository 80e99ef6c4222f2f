{{/* The prefix of every object's name: the release name, with "tandem" added unless it has it. */}}
{{- define "tandem.fullname" -}}
{{- if contains "tandem" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-tandem" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The name of one component's objects: "<fullname>-<component>". */}}
{{- define "tandem.name" -}}
{{- printf "%s-%s" (include "tandem.fullname" .root) .component -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "tandem.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/part-of: tandem
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels that select one component's pods. */}}
{{- define "tandem.selector" -}}
app.kubernetes.io/name: {{ .component }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{/* An image of Tandem's: "<registry>/<name>:<tag>". */}}
{{- define "tandem.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- if .root.Values.image.registry -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .name $tag -}}
{{- else -}}
{{- printf "%s:%s" .name $tag -}}
{{- end -}}
{{- end -}}

{{/* The scheduler name pods opt in with. */}}
{{- define "tandem.schedulerName" -}}
{{- if .Values.schedulerName -}}
{{- .Values.schedulerName -}}
{{- else if eq .Values.mode "plugin" -}}
tandem-plugin-scheduler
{{- else -}}
tandem-scheduler
{{- end -}}
{{- end -}}

{{/* The Secret holding id-secret and intake-token. */}}
{{- define "tandem.idsSecret" -}}
{{- .Values.ids.existingSecret | default (include "tandem.name" (dict "root" . "component" "ids")) -}}
{{- end -}}

{{/* The Secret holding the placement private key (placement.key). */}}
{{- define "tandem.placementSecret" -}}
{{- .Values.placement.existingSecret | default (include "tandem.name" (dict "root" . "component" "placement-key")) -}}
{{- end -}}

{{/* The ConfigMap holding the public keys nodes verify placements with (placement-keys.pem). */}}
{{- define "tandem.placementKeys" -}}
{{- include "tandem.name" (dict "root" . "component" "placement-keys") -}}
{{- end -}}

{{/* The service account of the release's scheduler path: the one account that writes placements. */}}
{{- define "tandem.placementWriter" -}}
{{- if eq .Values.mode "volcano" -}}
{{- include "tandem.name" (dict "root" . "component" "volcano-adapter") -}}
{{- else if eq .Values.mode "plugin" -}}
{{- include "tandem.name" (dict "root" . "component" "plugin-scheduler") -}}
{{- else -}}
{{- include "tandem.name" (dict "root" . "component" "kube-adapter") -}}
{{- end -}}
{{- end -}}

{{/*
Whether the chart is rendered against a cluster: `lookup` answers from the API server under
helm install/upgrade, and nothing under helm template (GitOps tools such as Argo CD render that
way). A Secret the chart would generate is then generated anew at every render, so it is refused
(see tandem.generated) unless secrets.renderWithoutCluster says a fresh one is wanted.
*/}}
{{- define "tandem.clusterAccess" -}}
{{- $namespaces := lookup "v1" "Namespace" "" "" -}}
{{- if and $namespaces $namespaces.items -}}true{{- end -}}
{{- end -}}

{{/*
Fails the render when the Secret `.what` would be generated without cluster access (a new one at
every render), saying how to create it once and name it (`.how`).
*/}}
{{- define "tandem.generated" -}}
{{- if and (not (include "tandem.clusterAccess" .root)) (not .root.Values.secrets.renderWithoutCluster) -}}
{{- fail (printf "rendered without cluster access (helm template, GitOps): %s would be generated anew at every render, so every render would change it. Create it once and name it: %s. Or set secrets.renderWithoutCluster=true where a fresh one is wanted (previews, tests)." .what .how) -}}
{{- end -}}
{{- end -}}

{{/* The intake every profiler posts to: the extender (extender mode), Volcano's, or the plugin's scheduler. */}}
{{- define "tandem.adapter" -}}
{{- if eq .Values.mode "volcano" -}}
{{- include "tandem.name" (dict "root" . "component" "volcano-adapter") -}}
{{- else if eq .Values.mode "plugin" -}}
{{- include "tandem.name" (dict "root" . "component" "plugin-scheduler") -}}
{{- else -}}
{{- include "tandem.name" (dict "root" . "component" "kube-adapter") -}}
{{- end -}}
{{- end -}}

{{/* The profilers' service account as the scheduler path names it: "<namespace>/<name>". */}}
{{- define "tandem.profilerAccount" -}}
{{- printf "%s/%s" .Release.Namespace (include "tandem.name" (dict "root" . "component" "profiler")) -}}
{{- end -}}

{{/*
The adapters' options for the profilers (profiler.enabled): each presents its pod's projected
service-account token, which the adapter reviews with the API server (TokenReview, the audience
profiler.tokenAudience); that profiler may then post profiles of its own node's pods only.
*/}}
{{- define "tandem.profilerArgs" -}}
{{- if .Values.profiler.enabled }}
- --profiler-service-account={{ include "tandem.profilerAccount" . }}
- --profiler-token-audience={{ .Values.profiler.tokenAudience }}
{{- end }}
{{- end -}}

{{/*
With the profiler on, the scheduler path's account `.name` reviews the profilers' tokens: create
on tokenreviews (cluster-scoped, so a ClusterRole), that account alone. Ends with "---".
*/}}
{{- define "tandem.tokenReviewRole" -}}
{{- if .root.Values.profiler.enabled }}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}-token-review
  labels:
    {{- include "tandem.labels" .root | nindent 4 }}
rules:
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ .name }}-token-review
  labels:
    {{- include "tandem.labels" .root | nindent 4 }}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {{ .name }}-token-review}
subjects:
- {kind: ServiceAccount, name: {{ .name }}, namespace: {{ .root.Release.Namespace }}}
---
{{- end }}
{{- end -}}

{{/* The engine's options as the adapters take them on their command line. */}}
{{- define "tandem.engineArgs" -}}
- --objective={{ .Values.engine.objective }}
- --max-jobs-per-gpu={{ .Values.engine.maxJobsPerGpu }}
- --resource={{ .Values.engine.resource }}
- --knowledge-configmap={{ .Values.knowledge.configMap }}
- --lease={{ include "tandem.name" (dict "root" . "component" "knowledge-writer") }}
{{- range $model, $cap := .Values.engine.modelCaps }}
- --model-cap={{ $model }}={{ $cap }}
{{- end }}
{{- range $model, $price := .Values.engine.gpuPrices }}
- --gpu-price={{ $model }}={{ $price }}
{{- end }}
{{- range $model, $watts := .Values.engine.gpuPowers }}
- --gpu-power={{ $model }}={{ $watts }}
{{- end }}
{{- if .Values.compiledCache }}
- --compiled-cache=/var/cache/tandem/compiled
{{- else }}
- --compiled-cache=
{{- end }}
{{- end -}}

{{/* What every Tandem container runs with: no privilege, a read-only root. */}}
{{- define "tandem.securityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities: {drop: ["ALL"]}
seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* Scheduling constraints for the control-side pods (not the DaemonSets). */}}
{{- define "tandem.placement" -}}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Refuses values that cannot work, naming them. */}}
{{- define "tandem.validate" -}}
{{- if not (has .Values.mode (list "plugin" "extender" "volcano")) -}}
{{- fail (printf "mode: %q is not one of plugin, extender, volcano" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.engine.objective (list "balanced" "min-slowdown" "max-packing")) -}}
{{- fail (printf "engine.objective: %q is not one of balanced, min-slowdown, max-packing" .Values.engine.objective) -}}
{{- end -}}
{{- end -}}
