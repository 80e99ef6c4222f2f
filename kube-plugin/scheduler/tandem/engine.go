package tandem

// The C ABI of kube-plugin/capi (its crate docs are the contract), declared by the header
// cbindgen generates from it. The static library is found through CGO_LDFLAGS=-L<dir>, which
// `cargo xtask kube-scheduler-plugin` sets.

/*
#cgo LDFLAGS: -ltandem_kube_capi -ldl -lpthread -lm
#include "tandem_kube_capi.h"
*/
import "C"

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	fwk "k8s.io/kube-scheduler/framework"
)

// engine is a handle on the Rust side: the core (engine component, knowledge base, intake),
// the cluster view and the decisions. Its methods may be called from any goroutine (Rust serializes them), except
// prefilter, which the scheduling cycle alone calls (it keeps the node table).
type engine struct {
	handle *C.TandemPlugin
	// table is the node table of the last PreFilter answer (see prepared).
	table *nodeTable
}

// settings are what Rust hands back from the validated plugin args.
type settings struct {
	CandidateNodes int `json:"candidateNodes"`
}

// connection is the scheduler's connection to the API server as Rust reads it (client-go's
// rest.Config, its files read): Rust keeps the knowledge base and its Lease with it. Byte
// slices are written as base64, as Rust expects.
type connection struct {
	Host            string `json:"host"`
	CAData          []byte `json:"caData,omitempty"`
	CertData        []byte `json:"certData,omitempty"`
	KeyData         []byte `json:"keyData,omitempty"`
	BearerToken     string `json:"bearerToken,omitempty"`
	BearerTokenFile string `json:"bearerTokenFile,omitempty"`
	Insecure        bool   `json:"insecure,omitempty"`
}

// connectionOf is config as Rust reads it; nil config means none (Rust keeps no knowledge
// base then).
func connectionOf(config *rest.Config) ([]byte, error) {
	if config == nil {
		return nil, nil
	}
	c := rest.CopyConfig(config)
	if err := rest.LoadTLSFiles(c); err != nil {
		return nil, fmt.Errorf("cannot read the scheduler's TLS files: %w", err)
	}
	host := c.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	return json.Marshal(connection{
		Host:            host,
		CAData:          c.CAData,
		CertData:        c.CertData,
		KeyData:         c.KeyData,
		BearerToken:     c.BearerToken,
		BearerTokenFile: c.BearerTokenFile,
		Insecure:        c.Insecure,
	})
}

// nodeTable is the node table PreFilter's verdicts follow: Rust sends it again only when a
// node came or went (a new generation).
type nodeTable struct {
	generation uint64
	index      map[string]int
	names      []string
}

// Kinds of a node's verdict, as Rust encodes them.
const (
	verdictFits         = 0
	verdictFails        = 1
	verdictUnresolvable = 2
)

// prepared is PreFilter's answer (Rust's `Prepared`, binary; its `encode` documents the
// layout): four bytes per node of the table, read in place by Filter and Score.
type prepared struct {
	managed  bool
	table    *nodeTable
	verdicts []byte
	reasons  []string
}

// verdict is the kind, score and reason of node name; ok is false for a node the table
// does not hold.
func (p *prepared) verdict(name string) (kind byte, score int64, reason string, ok bool) {
	at, ok := p.table.index[name]
	if !ok || 4*at+4 > len(p.verdicts) {
		return 0, 0, "", false
	}
	v := p.verdicts[4*at : 4*at+4]
	if v[0] != verdictFits {
		if r := int(binary.LittleEndian.Uint16(v[2:])); r < len(p.reasons) {
			reason = p.reasons[r]
		}
	}
	return v[0], int64(v[1]), reason, true
}

// ranked calls visit with the nodes where the pod fits, best score first (the table's order
// among equal scores), until visit returns false: one pass to bucket the nodes by score
// (0..100), none to sort them.
func (p *prepared) ranked(visit func(name string) bool) {
	var buckets [fwk.MaxNodeScore + 1][]int32
	for at := 0; 4*at+4 <= len(p.verdicts); at++ {
		v := p.verdicts[4*at : 4*at+4]
		if v[0] == verdictFits && int64(v[1]) <= fwk.MaxNodeScore {
			buckets[v[1]] = append(buckets[v[1]], int32(at))
		}
	}
	for score := fwk.MaxNodeScore; score >= 0; score-- {
		for _, at := range buckets[score] {
			if int(at) < len(p.table.names) && !visit(p.table.names[at]) {
				return
			}
		}
	}
}

// preparedFormat is the layout version Rust writes first.
const preparedFormat = C.PREPARED_FORMAT

// reader reads the binary answer, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		if r.err == nil {
			r.err = errors.New("truncated")
		}
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u32() int {
	if b := r.take(4); b != nil {
		return int(binary.LittleEndian.Uint32(b))
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) text() string {
	return string(r.take(r.u32()))
}

// decodePrepared reads Rust's answer; table is the node table held so far (nil for none),
// replaced when the answer carries a new one.
func decodePrepared(b []byte, table *nodeTable) (*prepared, error) {
	r := &reader{b: b}
	head := r.take(2)
	if r.err != nil || head[0] != preparedFormat {
		return nil, fmt.Errorf("cannot read Tandem's PreFilter answer: format %v", head)
	}
	if head[1] == 0 {
		return &prepared{}, nil
	}
	generation := r.u64()
	if included := r.take(1); r.err == nil && included[0] == 1 {
		names := r.u32()
		table = &nodeTable{generation: generation, index: make(map[string]int, names), names: make([]string, 0, names)}
		for i := 0; i < names && r.err == nil; i++ {
			name := r.text()
			table.index[name] = i
			table.names = append(table.names, name)
		}
	}
	count := r.u32()
	verdicts := r.take(4 * count)
	reasons := make([]string, r.u32())
	for i := range reasons {
		reasons[i] = r.text()
	}
	switch {
	case r.err != nil:
		return nil, fmt.Errorf("cannot read Tandem's PreFilter answer: %w", r.err)
	case table == nil || table.generation != generation || len(table.index) != count:
		return nil, fmt.Errorf("Tandem's PreFilter answer follows node table %d, not the one held", generation)
	}
	return &prepared{managed: true, table: table, verdicts: verdicts, reasons: reasons}, nil
}

// reserved is Reserve's answer: the annotations Bind puts on the Binding (the GPUs, and the
// memory the guard reserved on a shared one).
type reserved struct {
	Annotations map[string]string `json:"annotations"`
}

// errRefused marks an answer the Rust side gave as a refusal (the node cannot take the pod).
var errRefused = errors.New("refused")

// errUnseen: the Rust side has not seen that version of the pod yet (its event is on the way).
var errUnseen = errors.New("pod version not seen yet")

func bytesArg(b []byte) (*C.uint8_t, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

// call runs one C function and copies its buffer into Go memory. A status other than OK
// becomes an error carrying the buffer's message.
func call(f func(out *C.TandemBuf) C.TandemStatus) ([]byte, error) {
	var out C.TandemBuf
	status := f(&out)
	var answer []byte
	if out.ptr != nil {
		answer = C.GoBytes(unsafe.Pointer(out.ptr), C.int(out.len))
	}
	C.tandem_buf_free(out)
	switch status {
	case C.TANDEM_OK:
		return answer, nil
	case C.TANDEM_REFUSED:
		return nil, fmt.Errorf("%w: %s", errRefused, answer)
	case C.TANDEM_UNSEEN:
		return nil, errUnseen
	default:
		return nil, errors.New(string(answer))
	}
}

// newEngine starts the Rust side from the plugin args (JSON) and the scheduler's connection
// (JSON from connectionOf; nil for none).
func newEngine(args, conn []byte) (*engine, settings, error) {
	var handle *C.TandemPlugin
	a, n := bytesArg(args)
	c, cn := bytesArg(conn)
	answer, err := call(func(out *C.TandemBuf) C.TandemStatus {
		return C.tandem_plugin_new(a, n, c, cn, &handle, out)
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

func (e *engine) object(f func(*C.TandemPlugin, *C.uint8_t, C.size_t, *C.TandemBuf) C.TandemStatus, object any) error {
	body, err := json.Marshal(object)
	if err != nil {
		return err
	}
	a, n := bytesArg(body)
	_, err = call(func(out *C.TandemBuf) C.TandemStatus { return f(e.handle, a, n, out) })
	return err
}

func (e *engine) text(f func(*C.TandemPlugin, *C.uint8_t, C.size_t, *C.TandemBuf) C.TandemStatus, text string) error {
	a, n := bytesArg([]byte(text))
	_, err := call(func(out *C.TandemBuf) C.TandemStatus { return f(e.handle, a, n, out) })
	return err
}

func setNode(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.TandemStatus {
	return C.tandem_plugin_set_node(p, b, n, out)
}
func deleteNode(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.TandemStatus {
	return C.tandem_plugin_delete_node(p, b, n, out)
}
func setPod(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.TandemStatus {
	return C.tandem_plugin_set_pod(p, b, n, out)
}
func deletePod(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.TandemStatus {
	return C.tandem_plugin_delete_pod(p, b, n, out)
}
func unreserve(p *C.TandemPlugin, b *C.uint8_t, n C.size_t, out *C.TandemBuf) C.TandemStatus {
	return C.tandem_plugin_unreserve(p, b, n, out)
}

// prefilter judges a pod on every node: from what the pod's events told Rust when it has
// seen this version of the pod (the scheduler's pods come from the same informer), else from
// the pod itself. Only the scheduling cycle calls it.
func (e *engine) prefilter(pod *v1.Pod) (*prepared, error) {
	var known uint64
	if e.table != nil {
		known = e.table.generation
	}
	u, un := bytesArg([]byte(pod.UID))
	rv, rvn := bytesArg([]byte(pod.ResourceVersion))
	answer, err := call(func(out *C.TandemBuf) C.TandemStatus {
		return C.tandem_plugin_prefilter_known(e.handle, u, un, rv, rvn, C.uint64_t(known), out)
	})
	if errors.Is(err, errUnseen) {
		var body []byte
		if body, err = json.Marshal(leanOfPod(pod)); err != nil {
			return nil, err
		}
		a, n := bytesArg(body)
		answer, err = call(func(out *C.TandemBuf) C.TandemStatus {
			return C.tandem_plugin_prefilter(e.handle, a, n, C.uint64_t(known), out)
		})
	}
	if err != nil {
		return nil, err
	}
	p, err := decodePrepared(answer, e.table)
	if err != nil {
		return nil, err
	}
	if p.managed {
		e.table = p.table
	}
	return p, nil
}

// reserve chooses the pod's GPUs on node; errRefused when the node cannot take it.
func (e *engine) reserve(uid, node string) (*reserved, error) {
	u, un := bytesArg([]byte(uid))
	nd, nn := bytesArg([]byte(node))
	answer, err := call(func(out *C.TandemBuf) C.TandemStatus {
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
