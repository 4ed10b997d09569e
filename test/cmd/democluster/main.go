// Command democluster is `make run`: it starts a local control plane, seeds a demo AWS cluster
// with outdated boot images, writes a kubeconfig, runs the operator against it and prints the
// Events the operator records, until Ctrl-C.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/bootimage-operator/bootimage-operator/featuregates"
	"github.com/bootimage-operator/bootimage-operator/manifests"
	"github.com/bootimage-operator/bootimage-operator/test/fixtures"
	"github.com/bootimage-operator/bootimage-operator/test/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "democluster: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	say("Starting kube-apiserver and etcd")
	env, err := testenv.Start(testenv.Options{FeatureSet: manifests.TechPreviewNoUpgrade})
	if err != nil {
		return err
	}
	defer func() {
		say("Stopping kube-apiserver and etcd")
		_ = env.Stop()
	}()

	if err := seed(ctx, env.Client); err != nil {
		return fmt.Errorf("seeding the demo cluster: %w", err)
	}
	dir := filepath.Join(manifests.RepoRoot(), "bin", "demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}
	say("Demo cluster ready. In another terminal:\n\n    export KUBECONFIG=%s\n    kubectl get machinesets -n openshift-machine-api\n", kubeconfig)

	go printEvents(ctx, env)

	operator := exec.CommandContext(ctx, filepath.Join(manifests.RepoRoot(), "bin", "bootimage-operator"),
		"--kubeconfig", kubeconfig,
		"--release-version", fixtures.ReleaseVersion,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "127.0.0.1:18081",
	)
	operator.Stdout, operator.Stderr = os.Stdout, os.Stderr
	// Ctrl-C reaches the operator through the terminal; cancel covers other stops.
	operator.Cancel = func() error { return operator.Process.Signal(os.Interrupt) }
	say("Starting the operator (Ctrl-C stops everything)")
	if err := operator.Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("operator: %w", err)
	}
	return nil
}

// seed creates the demo cluster: AWS, tech preview gates, a stable 4.20 release, an RHCOS stream
// newer than the MachineSets' images, one custom-image MachineSet, and a CPMS.
func seed(ctx context.Context, c client.Client) error {
	objs := []client.Object{
		fixtures.Infrastructure(configv1.AWSPlatformType),
		fixtures.FeatureGate(configv1.TechPreviewNoUpgrade, fixtures.ReleaseVersion,
			[]configv1.FeatureGateName{featuregates.ManagedBootImagesCPMS, featuregates.BootImageSkewEnforcement}, nil),
		fixtures.ClusterVersion(fixtures.ReleaseVersion, true),
		fixtures.MachineConfiguration(nil),
		fixtures.BootImagesConfigMap(fixtures.Stream(), fixtures.ReleaseVersion),
		fixtures.UserDataSecret("worker-user-data", fixtures.IgnitionStubV3),
		fixtures.MachineSet("demo-x7k2p-worker-us-east-1a", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
		fixtures.MachineSet("demo-x7k2p-worker-us-east-1b", fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI)),
		fixtures.MachineSet("demo-x7k2p-worker-us-west-2a", fixtures.AWSProviderSpec("us-west-2", fixtures.OldAWSAMI)),
		fixtures.MachineSet("demo-x7k2p-custom-us-east-1c", fixtures.AWSProviderSpec("us-east-1", "ami-0c0570c0570c05700")),
		fixtures.ControlPlaneMachineSet(fixtures.AWSProviderSpec("us-east-1", fixtures.OldAWSAMI), machinev1.ControlPlaneMachineSetStateActive),
	}
	return fixtures.Create(ctx, c, objs...)
}

// printEvents prints each Event recorded in the demo cluster as it happens.
func printEvents(ctx context.Context, env *testenv.Env) {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		return
	}
	w, err := cs.CoreV1().Events("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if e, ok := ev.Object.(*corev1.Event); ok {
			say("Event %s %s %s/%s: %s", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
}

func say(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}
