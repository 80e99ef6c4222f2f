package tandem

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// declarationsRefused counts pods whose declaration Tandem refused, by the field it could not
// read: the counter the HTTP adapters serve under the same name, here in kube-scheduler's own
// /metrics (legacyregistry is what it serves), counted once per scheduling attempt as the
// extender counts once per filter.
var declarationsRefused = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "tandem_declarations_refused_total",
	Help:           "Scheduling attempts of pods whose Tandem declaration was refused, by field.",
	StabilityLevel: metrics.ALPHA,
}, []string{"field"})

var registerMetrics sync.Once

// register adds the plugin's metrics to kube-scheduler's registry, once per process (New runs
// once per profile).
func register() {
	registerMetrics.Do(func() {
		legacyregistry.MustRegister(declarationsRefused)
	})
}
