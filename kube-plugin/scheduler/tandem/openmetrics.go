package tandem

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The OpenMetrics text Rust answers (the prometheus-client crate's encoder), read back into
// families. prometheus/common's expfmt at this module's version parses the Prometheus text
// format only, which differs where it matters here (a counter family is named without its
// `_total`; `# EOF` ends the text), so this reads exactly what the Rust encoder writes:
// `# HELP`, `# TYPE` (counter, gauge, histogram), `# UNIT` (ignored) and `# EOF` lines, and
// samples with quoted, escaped labels, each right after its family's descriptor. Anything else
// is an error, not a guess.

// family is one metric family: its name as exported (a counter's with `_total`), help, type,
// label names (without a histogram's `le`) and series in the order first seen.
type family struct {
	name   string
	help   string
	kind   string
	labels []string
	series []*series
	byKey  map[string]*series
}

// series is one label set's value: value for counters and gauges; sum, count and the
// cumulative count per upper bound (without +Inf, which count is) for histograms.
type series struct {
	values  []string
	value   float64
	sum     float64
	count   uint64
	buckets map[float64]uint64
}

// Kinds of family.
const (
	kindCounter   = "counter"
	kindGauge     = "gauge"
	kindHistogram = "histogram"
)

// label is one name="value" pair of a sample.
type label struct{ name, value string }

// parseOpenMetrics reads the families of text, in order.
func parseOpenMetrics(text []byte) ([]*family, error) {
	var families []*family
	var current *family
	// base is the current family's name as the TYPE line gives it (a counter's samples add
	// `_total` to it, a histogram's `_sum`, `_count` and `_bucket`).
	var base string
	scanner := bufio.NewScanner(bytes.NewReader(text))
	scanner.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	line := 0
	for scanner.Scan() {
		line++
		row := scanner.Text()
		fail := func(format string, args ...any) error {
			return fmt.Errorf("line %d %q: %s", line, row, fmt.Sprintf(format, args...))
		}
		switch {
		case row == "# EOF":
			return families, nil
		case row == "":
			continue
		case strings.HasPrefix(row, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(row, "# HELP "), " ")
			base = name
			current = &family{name: name, help: help, byKey: map[string]*series{}}
			families = append(families, current)
		case strings.HasPrefix(row, "# TYPE "):
			name, kind, _ := strings.Cut(strings.TrimPrefix(row, "# TYPE "), " ")
			if current == nil || name != base {
				return nil, fail("a TYPE without its HELP")
			}
			switch kind {
			case kindCounter:
				current.name = name + "_total"
			case kindGauge, kindHistogram:
			default:
				return nil, fail("metric type %q is not read", kind)
			}
			current.kind = kind
		case strings.HasPrefix(row, "#"):
			// `# UNIT` (the unit is in the name already) and comments.
			continue
		default:
			if current == nil || current.kind == "" {
				return nil, fail("a sample before its family's HELP and TYPE")
			}
			name, labels, value, err := parseSample(row)
			if err != nil {
				return nil, fail("%v", err)
			}
			if err := current.add(base, name, labels, value); err != nil {
				return nil, fail("%v", err)
			}
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("the text ends without # EOF after %d lines", line)
}

// add records the sample name{labels} value of the family named base.
func (f *family) add(base, name string, labels []label, value string) error {
	suffix, ok := strings.CutPrefix(name, base)
	if !ok {
		return fmt.Errorf("a sample of another family than %s", base)
	}
	if suffix == "_created" {
		return nil
	}
	var le string
	if f.kind == kindHistogram && suffix == "_bucket" {
		kept := labels[:0:0]
		found := false
		for _, l := range labels {
			if l.name == "le" {
				le, found = l.value, true
			} else {
				kept = append(kept, l)
			}
		}
		if !found {
			return fmt.Errorf("a bucket without le")
		}
		labels = kept
	}
	s, err := f.at(labels)
	if err != nil {
		return err
	}
	number, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return fmt.Errorf("value %q: %w", value, err)
	}
	switch {
	case f.kind == kindCounter && suffix == "_total", f.kind == kindGauge && suffix == "":
		s.value = number
	case f.kind == kindHistogram && suffix == "_sum":
		s.sum = number
	case f.kind == kindHistogram && suffix == "_count":
		s.count = uint64(number)
	case f.kind == kindHistogram && suffix == "_bucket":
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil {
			return fmt.Errorf("le %q: %w", le, err)
		}
		if !math.IsInf(bound, +1) {
			s.buckets[bound] = uint64(number)
		}
	default:
		return fmt.Errorf("a %s has no sample %s", f.kind, name)
	}
	return nil
}

// at is the series of labels, made on first sight; every series of a family has the same
// label names, in the same order.
func (f *family) at(labels []label) (*series, error) {
	names := make([]string, len(labels))
	values := make([]string, len(labels))
	for i, l := range labels {
		names[i], values[i] = l.name, l.value
	}
	if len(f.series) == 0 {
		f.labels = names
	} else if strings.Join(names, ",") != strings.Join(f.labels, ",") {
		return nil, fmt.Errorf("labels %v, where the family has %v", names, f.labels)
	}
	key := strings.Join(values, "\xff")
	if s, ok := f.byKey[key]; ok {
		return s, nil
	}
	s := &series{values: values}
	if f.kind == kindHistogram {
		s.buckets = map[float64]uint64{}
	}
	f.byKey[key] = s
	f.series = append(f.series, s)
	return s, nil
}

// parseSample splits `name{a="x",b="y"} value [timestamp] [# exemplar]`.
func parseSample(text string) (name string, labels []label, value string, err error) {
	end := strings.IndexAny(text, "{ ")
	if end <= 0 {
		return "", nil, "", fmt.Errorf("no metric name")
	}
	name, rest := text[:end], text[end:]
	if rest[0] == '{' {
		if labels, rest, err = parseLabels(rest[1:]); err != nil {
			return "", nil, "", err
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return "", nil, "", fmt.Errorf("no value")
	}
	return name, labels, fields[0], nil
}

// parseLabels reads `a="x",b="y"}` and returns what follows the closing brace.
func parseLabels(text string) ([]label, string, error) {
	var labels []label
	for {
		if rest, ok := strings.CutPrefix(text, "}"); ok {
			return labels, rest, nil
		}
		if len(labels) > 0 {
			rest, ok := strings.CutPrefix(text, ",")
			if !ok {
				return nil, "", fmt.Errorf("labels not separated by commas")
			}
			text = rest
		}
		name, rest, ok := strings.Cut(text, `="`)
		if !ok || name == "" {
			return nil, "", fmt.Errorf("a label without a quoted value")
		}
		var value strings.Builder
		closed := false
		for i := 0; i < len(rest); i++ {
			c := rest[i]
			if c == '"' {
				text, closed = rest[i+1:], true
				break
			}
			if c == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					value.WriteByte('\n')
				case '\\', '"':
					value.WriteByte(rest[i])
				default:
					return nil, "", fmt.Errorf(`unknown escape \%c in label %s`, rest[i], name)
				}
				continue
			}
			value.WriteByte(c)
		}
		if !closed {
			return nil, "", fmt.Errorf("label %s is not closed", name)
		}
		labels = append(labels, label{name: name, value: value.String()})
	}
}
