package tandem

// The C ABI of kube-adapter/capi (its crate docs are the contract). The static library is
// found through CGO_LDFLAGS=-L<dir>, which `cargo xtask kube-scheduler-plugin` sets.

/*
#cgo LDFLAGS: -ltandem_kube_capi -ldl -lpthread -lm
#include <stdint.h>
#include <stddef.h>

typedef struct { uint8_t *ptr; size_t len; } TandemBuf;
typedef struct TandemPlugin TandemPlugin;

void tandem_buf_free(TandemBuf buf);
int32_t tandem_plugin_new(const uint8_t *args, size_t args_len, TandemPlugin **plugin, TandemBuf *out);
void tandem_plugin_free(TandemPlugin *plugin);
int32_t tandem_plugin_set_node(const TandemPlugin *p, const uint8_t *node, size_t len, TandemBuf *out);
int32_t tandem_plugin_delete_node(const TandemPlugin *p, const uint8_t *name, size_t len, TandemBuf *out);
int32_t tandem_plugin_set_pod(const TandemPlugin *p, const uint8_t *pod, size_t len, TandemBuf *out);
int32_t tandem_plugin_delete_pod(const TandemPlugin *p, const uint8_t *uid, size_t len, TandemBuf *out);
int32_t tandem_plugin_prefilter(const TandemPlugin *p, const uint8_t *pod, size_t len, TandemBuf *out);
int32_t tandem_plugin_reserve(const TandemPlugin *p, const uint8_t *uid, size_t uid_len, const uint8_t *node, size_t node_len, TandemBuf *out);
int32_t tandem_plugin_unreserve(const TandemPlugin *p, const uint8_t *uid, size_t len, TandemBuf *out);
int32_t tandem_plugin_restore(const TandemPlugin *p, const uint8_t *config_map, size_t len, TandemBuf *out);
int32_t tandem_plugin_snapshot(const TandemPlugin *p, TandemBuf *out);
int32_t tandem_plugin_stored(const TandemPlugin *p, const uint8_t *version, size_t len, TandemBuf *out);
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"
)

// Statuses of the C ABI.
const (
	statusOK      = 0
	statusRefused = 1
)

// engine is a handle on the Rust side: the engine component, the cluster view and the
// decisions. Its methods may be called from any goroutine (Rust serializes them).
type engine struct {
	handle *C.TandemPlugin
}

// settings are what Rust hands back from the validated plugin args.
type settings struct {
	Namespace          string `json:"namespace"`
	KnowledgeConfigMap string `json:"knowledgeConfigMap"`
}

// prepared is PreFilter's answer (Rust's `Prepared`).
type prepared struct {
	Managed      bool              `json:"managed"`
	Failed       map[string]string `json:"failed"`
	Unresolvable map[string]string `json:"unresolvable"`
	Scores       map[string]int64  `json:"scores"`
}

// reserved is Reserve's answer: the annotation Bind puts on the Binding.
type reserved struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// errRefused marks an answer the Rust side gave as a refusal (the node cannot take the pod).
var errRefused = errors.New("refused")

func bytesArg(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

// call runs one C function and copies its buffer into Go memory. A status other than OK
// becomes an error carrying the buffer's message.
func call(f func(out *C.TandemBuf) C.int32_t) ([]byte, error) {
	var out C.TandemBuf
	status := f(&out)
	var answer []byte
	if out.ptr != nil {
		answer = C.GoBytes(unsafe.Pointer(out.ptr), C.int(out.len))
	}
	C.tandem_buf_free(out)
	switch status {
	case statusOK:
		return answer, nil
	case statusRefused:
		return nil, fmt.Errorf("%w: %s", errRefused, answer)
	default:
		return nil, errors.New(string(answer))
	}
}

// newEngine starts the Rust side from the plugin args (JSON).
func newEngine(args []byte) (*engine, settings, error) {
	var handle *C.TandemPlugin
	a, n := bytesArg(args)
	answer, err := call(func(out *C.TandemBuf) C.int32_t {
		return C.tandem_plugin_new(a, n, &handle, out)
	})
	if err != nil {
		return nil, settings{}, err
	}
	var s settings
	if err := json.Unmarshal(answer, &s); err != nil {
		C.tandem_plugin_free(handle)
		return nil, settings{}, fmt.Errorf("cannot read the plugin settings: %w", err)
	}
	return &engine{handle: handle}, s, nil
}

func (e *engine) object(f func(*C.TandemPlugin, *C.uint8_t, C.size_t, *C.TandemBuf) C.int32_t, object any) error {
	body, err := json.Marshal(object)
	if err != nil {
		return err
	}
	a, n := bytesArg(body)
	_, err = call(func(out *C.TandemBuf) C.int32_t { return f(e.handle, a, n, out) })
	return err
}

func (e *engine) text(f func(*C.TandemPlugin, *C.uint8_t, C.size_t, *C.TandemBuf) C.int32_t, text string) error {
	a, n := bytesArg([]byte(text))
	_, err := call(func(out *C.TandemBuf) C.int32_t { return f(e.handle, a, n, out) })
	return err
}

func setNode(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.int32_t {
	return C.tandem_plugin_set_node(p, b, n, out)
}
func deleteNode(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.int32_t {
	return C.tandem_plugin_delete_node(p, b, n, out)
}
func setPod(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.int32_t {
	return C.tandem_plugin_set_pod(p, b, n, out)
}
func deletePod(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.int32_t {
	return C.tandem_plugin_delete_pod(p, b, n, out)
}
func unreserve(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.int32_t {
	return C.tandem_plugin_unreserve(p, b, n, out)
}
func stored(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.int32_t {
	return C.tandem_plugin_stored(p, b, n, out)
}

// prefilter judges a pod (already JSON) on every node.
func (e *engine) prefilter(pod []byte) (*prepared, error) {
	a, n := bytesArg(pod)
	answer, err := call(func(out *C.TandemBuf) C.int32_t {
		return C.tandem_plugin_prefilter(e.handle, a, n, out)
	})
	if err != nil {
		return nil, err
	}
	var p prepared
	if err := json.Unmarshal(answer, &p); err != nil {
		return nil, fmt.Errorf("cannot read Tandem's PreFilter answer: %w", err)
	}
	return &p, nil
}

// reserve chooses the pod's GPUs on node; errRefused when the node cannot take it.
func (e *engine) reserve(uid, node string) (*reserved, error) {
	u, un := bytesArg([]byte(uid))
	nd, nn := bytesArg([]byte(node))
	answer, err := call(func(out *C.TandemBuf) C.int32_t {
		return C.tandem_plugin_reserve(e.handle, u, un, nd, nn, out)
	})
	if err != nil {
		return nil, err
	}
	var r reserved
	if err := json.Unmarshal(answer, &r); err != nil {
		return nil, fmt.Errorf("cannot read Tandem's Reserve answer: %w", err)
	}
	return &r, nil
}

// restore loads the knowledge base from its ConfigMap (JSON); whether it changed.
func (e *engine) restore(configMap []byte) (bool, error) {
	a, n := bytesArg(configMap)
	answer, err := call(func(out *C.TandemBuf) C.int32_t {
		return C.tandem_plugin_restore(e.handle, a, n, out)
	})
	if err != nil {
		return false, err
	}
	return string(answer) == "true", nil
}

// snapshot is the knowledge-base ConfigMap (JSON) to write.
func (e *engine) snapshot() ([]byte, error) {
	return call(func(out *C.TandemBuf) C.int32_t { return C.tandem_plugin_snapshot(e.handle, out) })
}
