package tandem

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

// node is one node's verdict in an answer written by encode.
type node struct {
	name   string
	kind   byte
	score  byte
	reason uint16
}

// encode writes a managed PreFilter answer in the layout of Rust's Prepared::encode, the
// table's names included when withTable is set.
func encode(generation uint64, withTable bool, nodes []node, reasons []string) []byte {
	out := []byte{preparedFormat, 1}
	out = binary.LittleEndian.AppendUint64(out, generation)
	text := func(s string) {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(s)))
		out = append(out, s...)
	}
	if withTable {
		out = append(out, 1)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(nodes)))
		for _, n := range nodes {
			text(n.name)
		}
	} else {
		out = append(out, 0)
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(len(nodes)))
	for _, n := range nodes {
		out = append(out, n.kind, n.score)
		out = binary.LittleEndian.AppendUint16(out, n.reason)
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(len(reasons)))
	for _, r := range reasons {
		text(r)
	}
	return out
}

var threeNodes = []node{
	{name: "a", kind: verdictFits, score: 40},
	{name: "b", kind: verdictFails, reason: 1},
	{name: "c", kind: verdictFits, score: 90},
	{name: "d", kind: verdictUnresolvable, reason: 0},
	{name: "e", kind: verdictFits, score: 40},
}

func TestDecodeReadsTheTableVerdictsAndReasons(t *testing.T) {
	reasons := []string{"no GPU of the model", "would run out of GPU memory"}
	p, err := decodePrepared(encode(7, true, threeNodes, reasons), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.managed || p.table.generation != 7 {
		t.Fatalf("got %+v", p)
	}
	if want := []string{"a", "b", "c", "d", "e"}; !reflect.DeepEqual(p.table.names, want) {
		t.Fatalf("names %v, want %v", p.table.names, want)
	}
	for _, tc := range []struct {
		name   string
		kind   byte
		score  int64
		reason string
	}{
		{"a", verdictFits, 40, ""},
		{"b", verdictFails, 0, "would run out of GPU memory"},
		{"c", verdictFits, 90, ""},
		{"d", verdictUnresolvable, 0, "no GPU of the model"},
	} {
		kind, score, reason, ok := p.verdict(tc.name)
		if !ok || kind != tc.kind || score != tc.score || reason != tc.reason {
			t.Errorf("%s: got (%d, %d, %q, %v), want (%d, %d, %q)", tc.name, kind, score, reason, ok, tc.kind, tc.score, tc.reason)
		}
	}
	if _, _, _, ok := p.verdict("z"); ok {
		t.Error("a node outside the table has a verdict")
	}
}

func TestDecodeKeepsTheHeldTableOfTheSameGeneration(t *testing.T) {
	first, err := decodePrepared(encode(3, true, threeNodes, []string{"x", "y"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := decodePrepared(encode(3, false, threeNodes, []string{"x", "y"}), first.table)
	if err != nil {
		t.Fatal(err)
	}
	if again.table != first.table {
		t.Error("an answer without names did not keep the held table")
	}
	if _, err := decodePrepared(encode(4, false, threeNodes, []string{"x", "y"}), first.table); err == nil ||
		!strings.Contains(err.Error(), "node table 4") {
		t.Errorf("an answer following another generation was read: %v", err)
	}
	if _, err := decodePrepared(encode(3, false, threeNodes, []string{"x", "y"}), nil); err == nil {
		t.Error("an answer without names was read with no table held")
	}
}

func TestDecodeRefusesUnmanagedTruncatedAndForeignAnswers(t *testing.T) {
	p, err := decodePrepared([]byte{preparedFormat, 0}, nil)
	if err != nil || p.managed {
		t.Fatalf("unmanaged: %+v, %v", p, err)
	}
	whole := encode(1, true, threeNodes, []string{"x", "y"})
	for cut := 0; cut < len(whole); cut++ {
		if _, err := decodePrepared(whole[:cut], nil); err == nil {
			t.Fatalf("an answer cut at %d of %d bytes was read", cut, len(whole))
		}
	}
	foreign := append([]byte{preparedFormat + 1}, whole[1:]...)
	if _, err := decodePrepared(foreign, nil); err == nil || !strings.Contains(err.Error(), "format") {
		t.Errorf("another layout was read: %v", err)
	}
}

func TestRankedVisitsFittingNodesBestFirstAndStops(t *testing.T) {
	p, err := decodePrepared(encode(1, true, threeNodes, []string{"x", "y"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	p.ranked(func(name string) bool { all = append(all, name); return true })
	// Equal scores keep the table's order; nodes that do not fit are never offered.
	if want := []string{"c", "a", "e"}; !reflect.DeepEqual(all, want) {
		t.Errorf("ranked %v, want %v", all, want)
	}
	var first []string
	p.ranked(func(name string) bool { first = append(first, name); return len(first) < 2 })
	if want := []string{"c", "a"}; !reflect.DeepEqual(first, want) {
		t.Errorf("stopped after %v, want %v", first, want)
	}
}
