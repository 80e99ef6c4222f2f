{{/*
The Role of whatever keeps the knowledge base, in the release namespace, and its binding:
the head ConfigMap (get, create, update) and, once the knowledge base outgrows one ConfigMap,
its immutable shards (create; list by label, and delete those the head no longer lists); and the
Lease that elects the one writer. RBAC cannot narrow these to the shards' labels: the Role stays
in this namespace.
*/}}
{{- define "tandem.knowledgeRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "tandem.labels" .root | nindent 4 }}
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "create", "update", "delete"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .name }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "tandem.labels" .root | nindent 4 }}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ .name }}}
subjects:
- {kind: ServiceAccount, name: {{ .name }}, namespace: {{ .root.Release.Namespace }}}
{{- end -}}
