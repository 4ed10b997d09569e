// Command bootimage-operator keeps the boot images of MachineSets and the ControlPlaneMachineSet
// in step with the cluster's RHCOS stream.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootimage-operator/bootimage-operator/controllers"
)

// Leader election timings of OpenShift's recommended defaults for operators: a 137s lease
// tolerates a 60s kube-apiserver outage without losing leadership.
const (
	leaseDuration = 137 * time.Second
	renewDeadline = 107 * time.Second
	retryPeriod   = 26 * time.Second
	leaseName     = "bootimage-operator"
	leaseNS       = "openshift-machine-config-operator"
)

type options struct {
	kubeconfig     string
	releaseVersion string
	leaderElect    bool
	metricsAddr    string
	probeAddr      string
	ovaCacheDir    string
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "bootimage-operator: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bootimage-operator", flag.ContinueOnError)
	var opts options
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Default: $KUBECONFIG, else the in-cluster config.")
	fs.StringVar(&opts.releaseVersion, "release-version", os.Getenv("RELEASE_VERSION"), "Release version whose feature gates apply. Default: $RELEASE_VERSION, else ClusterVersion/version status.desired.version.")
	fs.BoolVar(&opts.leaderElect, "leader-elect", true, "Hold a Lease in "+leaseNS+" so only one replica acts.")
	fs.StringVar(&opts.metricsAddr, "metrics-bind-address", ":8080", "Address of the Prometheus metrics endpoint; \"0\" turns it off.")
	fs.StringVar(&opts.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; \"0\" turns them off.")
	fs.StringVar(&opts.ovaCacheDir, "ova-cache-dir", controllers.DefaultOVACacheDir, "Writable directory for downloaded vSphere OVAs.")
	logConfig := textlogger.NewConfig()
	logConfig.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	logger := textlogger.NewLogger(logConfig)
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	log := logger.WithName("setup")

	restConfig, err := loadRESTConfig(opts.kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        controllers.NewScheme(),
		Cache:                         controllers.CacheOptions(),
		Metrics:                       metricsserver.Options{BindAddress: opts.metricsAddr},
		HealthProbeBindAddress:        opts.probeAddr,
		LeaderElection:                opts.leaderElect,
		LeaderElectionID:              leaseName,
		LeaderElectionNamespace:       leaseNS,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 ptr(leaseDuration),
		RenewDeadline:                 ptr(renewDeadline),
		RetryPeriod:                   ptr(retryPeriod),
		GracefulShutdownTimeout:       ptr(30 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if err := controllers.Setup(mgr, controllers.Config{ReleaseVersion: opts.releaseVersion, OVACacheDir: opts.ovaCacheDir}); err != nil {
		return fmt.Errorf("setting up controllers: %w", err)
	}
	go func() {
		select {
		case <-mgr.Elected():
			if opts.leaderElect {
				log.Info("Leader elected", "lease", leaseNS+"/"+leaseName)
			}
		case <-ctx.Done():
		}
	}()
	log.Info("Starting manager", "releaseVersion", opts.releaseVersion, "leaderElect", opts.leaderElect, "host", restConfig.Host)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	log.Info("Manager stopped")
	return nil
}

// loadRESTConfig reads the kubeconfig flag, then $KUBECONFIG, then the in-cluster config.
func loadRESTConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		kubeconfig = os.Getenv("KUBECONFIG")
	}
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig, no KUBECONFIG and not in a cluster: %w", err)
	}
	return cfg, nil
}

func ptr[T any](v T) *T { return &v }
