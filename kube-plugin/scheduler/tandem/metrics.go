package tandem

import (
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// The plugin's metrics are the families every Tandem adapter serves (tandem_decisions_total,
// tandem_request_latency_seconds, ...), counted in Rust (adapter-core's Metrics, one
// definition for all adapters) and re-exported here, at each scrape, in kube-scheduler's own
// /metrics (legacyregistry is what it serves).

// rustCollector re-emits the families Rust counted, as const metrics, each time the
// scheduler's registry is scraped. Rust's families are the one source: nothing is counted in
// Go. Several profiles running Tandem each have their engine; their series are merged
// (counters and histograms added, gauges the largest: each engine sees the same cluster).
type rustCollector struct {
	metrics.BaseStableCollector

	mu      sync.Mutex
	sources []func() ([]byte, error)
}

var _ metrics.StableCollector = (*rustCollector)(nil)

var (
	rustMetrics     = &rustCollector{}
	registerMetrics sync.Once
)

// stability is the level of every Tandem family in kube-scheduler's /metrics.
const stability = metrics.ALPHA

// register adds the metrics of e to kube-scheduler's registry (the collector is registered
// once per process; New runs once per profile).
func register(e *engine) {
	rustMetrics.add(e.metrics)
	registerMetrics.Do(func() {
		legacyregistry.CustomMustRegister(rustMetrics)
	})
}

// add makes source's text part of every scrape.
func (c *rustCollector) add(source func() ([]byte, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sources = append(c.sources, source)
}

// gather reads and merges the families of every source.
func (c *rustCollector) gather() ([]*family, error) {
	c.mu.Lock()
	sources := append([]func() ([]byte, error)(nil), c.sources...)
	c.mu.Unlock()
	var merged []*family
	byName := map[string]*family{}
	for _, source := range sources {
		text, err := source()
		if err != nil {
			return nil, err
		}
		families, err := parseOpenMetrics(text)
		if err != nil {
			return nil, fmt.Errorf("cannot read Tandem's metrics: %w", err)
		}
		for _, f := range families {
			into, ok := byName[f.name]
			if !ok {
				byName[f.name] = f
				merged = append(merged, f)
				continue
			}
			if err := into.merge(f); err != nil {
				return nil, err
			}
		}
	}
	return merged, nil
}

// merge adds other's series (the same family, from another engine) to f's.
func (f *family) merge(other *family) error {
	if other.kind != f.kind {
		return fmt.Errorf("%s is a %s and a %s", f.name, f.kind, other.kind)
	}
	for _, s := range other.series {
		labels := make([]label, len(s.values))
		for i, value := range s.values {
			labels[i] = label{name: other.labels[i], value: value}
		}
		into, err := f.at(labels)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		switch f.kind {
		case kindCounter:
			into.value += s.value
		case kindGauge:
			into.value = math.Max(into.value, s.value)
		case kindHistogram:
			into.sum += s.sum
			into.count += s.count
			for bound, count := range s.buckets {
				into.buckets[bound] += count
			}
		}
	}
	return nil
}

// annotatedHelp is f's help as component-base annotates it (with the stability level).
func (f *family) annotatedHelp() string {
	return fmt.Sprintf("[%v] %v", stability, f.help)
}

// DescribeWithStability describes the families Rust exports when the collector is
// registered, with the label names of the series they hold then; a family's series only
// appear once counted (a GPU model's, for example).
func (c *rustCollector) DescribeWithStability(ch chan<- *metrics.Desc) {
	families, err := c.gather()
	if err != nil {
		klog.ErrorS(err, "Tandem's metrics cannot be described")
		return
	}
	for _, f := range families {
		ch <- metrics.NewDesc(f.name, f.help, f.labels, nil, stability, "")
	}
}

// CollectWithStability emits every series of Rust's families as a const metric. A failure
// is logged and leaves Tandem's families out of this scrape, not the scheduler's own.
func (c *rustCollector) CollectWithStability(ch chan<- metrics.Metric) {
	families, err := c.gather()
	if err != nil {
		klog.ErrorS(err, "Tandem's metrics are left out of this scrape")
		return
	}
	for _, f := range families {
		if err := f.emit(ch); err != nil {
			klog.ErrorS(err, "A Tandem metric is left out of this scrape", "family", f.name)
		}
	}
}

// emit sends f's series to ch.
func (f *family) emit(ch chan<- metrics.Metric) error {
	if len(f.series) == 0 {
		return nil
	}
	// The labels are known from the series (Rust fixes them per family); a const metric
	// needs a Desc made for them, which component-base only offers for counters and gauges.
	desc := prometheus.NewDesc(f.name, f.annotatedHelp(), f.labels, nil)
	var failed []string
	for _, s := range f.series {
		var m prometheus.Metric
		var err error
		switch f.kind {
		case kindCounter:
			m, err = prometheus.NewConstMetric(desc, prometheus.CounterValue, s.value, s.values...)
		case kindGauge:
			m, err = prometheus.NewConstMetric(desc, prometheus.GaugeValue, s.value, s.values...)
		case kindHistogram:
			m, err = prometheus.NewConstHistogram(desc, s.count, s.sum, s.buckets, s.values...)
		}
		if err != nil {
			failed = append(failed, err.Error())
			continue
		}
		ch <- m
	}
	if len(failed) > 0 {
		return fmt.Errorf("%s", strings.Join(failed, "; "))
	}
	return nil
}
