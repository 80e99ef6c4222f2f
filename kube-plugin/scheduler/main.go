// Command tandem-kube-scheduler is kube-scheduler with the Tandem framework plugin
// registered: enable `Tandem` in a profile of its KubeSchedulerConfiguration (see
// deploy/helm/tandem/templates/plugin.yaml).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"tandem.invalid/scheduler-plugin/tandem"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(tandem.Name, tandem.New))
	os.Exit(cli.Run(command))
}
