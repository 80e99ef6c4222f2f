package tandem

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// rustText is OpenMetrics text as the Rust encoder (prometheus-client) writes it: a counter
// family named without `_total`, `le` first among a bucket's labels, a unit line, an escaped
// label value.
const rustText = `# HELP tandem_decisions Requests answered, per verb and result.
# TYPE tandem_decisions counter
tandem_decisions_total{verb="prefilter",result="ok"} 3
tandem_decisions_total{verb="reserve",result="rejected"} 1
# HELP tandem_view_gpus GPUs in the engine's cluster view.
# TYPE tandem_view_gpus gauge
tandem_view_gpus 4
# HELP tandem_request_latency_seconds Time to answer a request, per verb.
# TYPE tandem_request_latency_seconds histogram
# UNIT tandem_request_latency_seconds seconds
tandem_request_latency_seconds_sum{verb="prefilter"} 0.0035
tandem_request_latency_seconds_count{verb="prefilter"} 3
tandem_request_latency_seconds_bucket{le="0.001",verb="prefilter"} 2
tandem_request_latency_seconds_bucket{le="0.002",verb="prefilter"} 3
tandem_request_latency_seconds_bucket{le="+Inf",verb="prefilter"} 3
# HELP tandem_outcomes_skipped Finished pods that taught nothing, per reason.
# TYPE tandem_outcomes_skipped counter
tandem_outcomes_skipped_total{reason="a \"quoted\", {braced} \\ reason\nover two lines"} 0
# HELP tandem_memory_prediction_error_ratio Nothing measured yet.
# TYPE tandem_memory_prediction_error_ratio histogram
# EOF
`

func TestTheRustEncodersTextIsReadFamilyByFamily(t *testing.T) {
	families, err := parseOpenMetrics([]byte(rustText))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.name+" "+f.kind)
	}
	want := []string{
		"tandem_decisions_total counter",
		"tandem_view_gpus gauge",
		"tandem_request_latency_seconds histogram",
		"tandem_outcomes_skipped_total counter",
		"tandem_memory_prediction_error_ratio histogram",
	}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("families %v, want %v", names, want)
	}
	decisions := families[0]
	if !reflect.DeepEqual(decisions.labels, []string{"verb", "result"}) || len(decisions.series) != 2 ||
		!reflect.DeepEqual(decisions.series[1].values, []string{"reserve", "rejected"}) || decisions.series[0].value != 3 {
		t.Errorf("decisions: %+v", decisions)
	}
	if gpus := families[1]; len(gpus.labels) != 0 || gpus.series[0].value != 4 {
		t.Errorf("view: %+v", gpus)
	}
	latency := families[2]
	if !reflect.DeepEqual(latency.labels, []string{"verb"}) || len(latency.series) != 1 {
		t.Fatalf("latency: %+v", latency)
	}
	s := latency.series[0]
	if s.count != 3 || s.sum != 0.0035 || !reflect.DeepEqual(s.buckets, map[float64]uint64{0.001: 2, 0.002: 3}) {
		t.Errorf("latency series: %+v", s)
	}
	if reason := families[3].series[0].values[0]; reason != "a \"quoted\", {braced} \\ reason\nover two lines" {
		t.Errorf("escaped label read as %q", reason)
	}
	if empty := families[4]; len(empty.series) != 0 || empty.help != "Nothing measured yet." {
		t.Errorf("empty family: %+v", empty)
	}
}

func TestTextThatIsNotWhatRustWritesIsRefused(t *testing.T) {
	head := "# HELP tandem_x X.\n# TYPE tandem_x counter\n"
	for name, text := range map[string]string{
		"no EOF":                     head + "tandem_x_total 1\n",
		"a summary":                  "# HELP tandem_s S.\n# TYPE tandem_s summary\n# EOF\n",
		"a sample before its family": "tandem_x_total 1\n# EOF\n",
		"another family's sample":    head + "tandem_y_total 1\n# EOF\n",
		"a gauge's sample name":      head + "tandem_x 1\n# EOF\n",
		"an unclosed label":          head + "tandem_x_total{a=\"b} 1\n# EOF\n",
		"labels without commas":      head + "tandem_x_total{a=\"b\" c=\"d\"} 1\n# EOF\n",
		"changing label names":       head + "tandem_x_total{a=\"b\"} 1\ntandem_x_total{c=\"d\"} 1\n# EOF\n",
		"no value":                   head + "tandem_x_total{a=\"b\"}\n# EOF\n",
		"a value that is no number":  head + "tandem_x_total one\n# EOF\n",
		"a bucket without le":        "# HELP tandem_h H.\n# TYPE tandem_h histogram\ntandem_h_bucket 1\n# EOF\n",
	} {
		if families, err := parseOpenMetrics([]byte(text)); err == nil {
			t.Errorf("%s: read as %+v", name, families)
		}
	}
}

// registered is a fresh registry with a collector over sources, as legacyregistry holds it.
func registered(t *testing.T, sources ...string) metrics.KubeRegistry {
	t.Helper()
	c := &rustCollector{}
	for _, text := range sources {
		c.add(func() ([]byte, error) { return []byte(text), nil })
	}
	registry := metrics.NewKubeRegistry()
	registry.CustomMustRegister(c)
	return registry
}

func TestEveryFamilyIsReExportedWithItsLabelsHelpAndBuckets(t *testing.T) {
	want := `# HELP tandem_decisions_total [ALPHA] Requests answered, per verb and result.
# TYPE tandem_decisions_total counter
tandem_decisions_total{result="ok",verb="prefilter"} 3
tandem_decisions_total{result="rejected",verb="reserve"} 1
# HELP tandem_view_gpus [ALPHA] GPUs in the engine's cluster view.
# TYPE tandem_view_gpus gauge
tandem_view_gpus 4
# HELP tandem_request_latency_seconds [ALPHA] Time to answer a request, per verb.
# TYPE tandem_request_latency_seconds histogram
tandem_request_latency_seconds_bucket{verb="prefilter",le="0.001"} 2
tandem_request_latency_seconds_bucket{verb="prefilter",le="0.002"} 3
tandem_request_latency_seconds_bucket{verb="prefilter",le="+Inf"} 3
tandem_request_latency_seconds_sum{verb="prefilter"} 0.0035
tandem_request_latency_seconds_count{verb="prefilter"} 3
`
	names := []string{"tandem_decisions_total", "tandem_view_gpus", "tandem_request_latency_seconds"}
	if err := testutil.GatherAndCompare(registered(t, rustText), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestTheEnginesOfSeveralProfilesAreMerged(t *testing.T) {
	other := `# HELP tandem_decisions Requests answered, per verb and result.
# TYPE tandem_decisions counter
tandem_decisions_total{verb="prefilter",result="ok"} 2
tandem_decisions_total{verb="prefilter",result="error"} 1
# HELP tandem_view_gpus GPUs in the engine's cluster view.
# TYPE tandem_view_gpus gauge
tandem_view_gpus 2
# HELP tandem_request_latency_seconds Time to answer a request, per verb.
# TYPE tandem_request_latency_seconds histogram
tandem_request_latency_seconds_sum{verb="prefilter"} 0.0005
tandem_request_latency_seconds_count{verb="prefilter"} 1
tandem_request_latency_seconds_bucket{le="0.001",verb="prefilter"} 1
tandem_request_latency_seconds_bucket{le="0.002",verb="prefilter"} 1
tandem_request_latency_seconds_bucket{le="+Inf",verb="prefilter"} 1
# EOF
`
	want := `# HELP tandem_decisions_total [ALPHA] Requests answered, per verb and result.
# TYPE tandem_decisions_total counter
tandem_decisions_total{result="error",verb="prefilter"} 1
tandem_decisions_total{result="ok",verb="prefilter"} 5
tandem_decisions_total{result="rejected",verb="reserve"} 1
# HELP tandem_view_gpus [ALPHA] GPUs in the engine's cluster view.
# TYPE tandem_view_gpus gauge
tandem_view_gpus 4
# HELP tandem_request_latency_seconds [ALPHA] Time to answer a request, per verb.
# TYPE tandem_request_latency_seconds histogram
tandem_request_latency_seconds_bucket{verb="prefilter",le="0.001"} 3
tandem_request_latency_seconds_bucket{verb="prefilter",le="0.002"} 4
tandem_request_latency_seconds_bucket{verb="prefilter",le="+Inf"} 4
tandem_request_latency_seconds_sum{verb="prefilter"} 0.004
tandem_request_latency_seconds_count{verb="prefilter"} 4
`
	names := []string{"tandem_decisions_total", "tandem_view_gpus", "tandem_request_latency_seconds"}
	if err := testutil.GatherAndCompare(registered(t, rustText, other), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
}

func TestTextRustCannotBeReadLeavesOnlyTandemsFamiliesOut(t *testing.T) {
	readable := true
	c := &rustCollector{}
	c.add(func() ([]byte, error) {
		if readable {
			return []byte(rustText), nil
		}
		return []byte("tandem_x_total 1\n"), nil
	})
	registry := metrics.NewKubeRegistry()
	registry.CustomMustRegister(c)
	own := metrics.NewCounter(&metrics.CounterOpts{Name: "scheduler_own_total", Help: "The scheduler's own."})
	registry.MustRegister(own)
	own.Inc()
	count := func() (tandem, others int) {
		families, err := registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if strings.HasPrefix(f.GetName(), "tandem_") {
				tandem++
			} else {
				others++
			}
		}
		return tandem, others
	}
	if tandem, others := count(); tandem != 4 || others != 1 {
		t.Fatalf("readable: %d Tandem families and %d others", tandem, others)
	}
	readable = false
	if tandem, others := count(); tandem != 0 || others != 1 {
		t.Fatalf("unreadable: %d Tandem families and %d others", tandem, others)
	}
}

// TestTheRealEnginesMetricsAreReExported starts the Rust side as New does and reads its
// metrics through the collector: the parser reads what the real encoder writes.
func TestTheRealEnginesMetricsAreReExported(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "id-secret")
	if err := os.WriteFile(secret, []byte("00112233445566778899aabbccddeeff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e, _, err := newEngine([]byte(`{"idSecretFile": "`+secret+`", "unsignedPlacements": true}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	text, err := e.metrics()
	if err != nil {
		t.Fatal(err)
	}
	families, err := parseOpenMetrics(text)
	if err != nil {
		t.Fatalf("%v in\n%s", err, text)
	}
	kinds := map[string]string{}
	for _, f := range families {
		kinds[f.name] = f.kind
	}
	for name, kind := range map[string]string{
		// Families without labels exist from the start; those with labels once a series is
		// counted (decisions, latency, engine calls: the e2e test reads those).
		"tandem_retrain_seconds":            kindHistogram,
		"tandem_engine_errors_total":        kindCounter,
		"tandem_fail_opens_total":           kindCounter,
		"tandem_declarations_refused_total": kindCounter,
		"tandem_view_gpus":                  kindGauge,
		"tandem_view_rebuilds_total":        kindCounter,
		"tandem_store_bytes":                kindGauge,
		"tandem_store_writes_total":         kindCounter,
	} {
		if kinds[name] != kind {
			t.Errorf("%s is %q, want a %s", name, kinds[name], kind)
		}
	}
	c := &rustCollector{}
	c.add(e.metrics)
	registry := metrics.NewKubeRegistry()
	registry.CustomMustRegister(c)
	want := `# HELP tandem_declarations_refused_total [ALPHA] Jobs refused at a scheduler's call for a declaration that does not parse, per field.
# TYPE tandem_declarations_refused_total counter
tandem_declarations_refused_total{field="batch-size"} 0
tandem_declarations_refused_total{field="model"} 0
tandem_declarations_refused_total{field="priority"} 0
tandem_declarations_refused_total{field="work"} 0
# HELP tandem_fail_opens_total [ALPHA] Requests answered so that the scheduler goes on without Tandem.
# TYPE tandem_fail_opens_total counter
tandem_fail_opens_total{verb="prefilter"} 0
tandem_fail_opens_total{verb="reserve"} 0
`
	if err := testutil.GatherAndCompare(registry, strings.NewReader(want),
		"tandem_declarations_refused_total", "tandem_fail_opens_total"); err != nil {
		t.Fatal(err)
	}
}
