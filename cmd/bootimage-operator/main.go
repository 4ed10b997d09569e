// Command bootimage-operator keeps the boot images of MachineSets and the ControlPlaneMachineSet
// in step with the cluster's RHCOS stream.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootimage-operator/bootimage-operator/bootimage/cloud/gcpcloud"
	"github.com/bootimage-operator/bootimage-operator/controllers"
	"github.com/bootimage-operator/bootimage-operator/internal/buildinfo"
	"github.com/bootimage-operator/bootimage-operator/internal/kube"
	"github.com/bootimage-operator/bootimage-operator/internal/vsphereimport"
	"github.com/bootimage-operator/bootimage-operator/leader"
)

// The Lease; its timings follow the control plane topology (clustertuning.go).
const (
	leaseName = "bootimage-operator"
	leaseNS   = "openshift-machine-config-operator"
)

// Client-side limits of the operator's API client. A wave of boot image updates is one patch per
// MachineSet, read from the cache; these let a thousand go at the API server's own pace, whose
// priority and fairness protects it beyond that. Events go through their own client and limits.
const (
	defaultKubeAPIQPS   = 200
	defaultKubeAPIBurst = 400
)

type options struct {
	kubeconfig      string
	releaseVersion  string
	leaderElect     bool
	metricsAddr     string
	metricsCertDir  string
	probeAddr       string
	kubeAPIQPS      float64
	kubeAPIBurst    int
	clusterOperator string
	ovaCacheDir     string
	logConfig       *textlogger.Config
	showVersion     bool
}

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "bootimage-operator: %v\n", err)
		os.Exit(1)
	}
	if opts.showVersion {
		fmt.Printf("bootimage-operator %s\n", buildinfo.Read())
		return
	}
	// The process-wide loggers are set here and only here: client-go and controller-runtime
	// internals log through them.
	logger := textlogger.NewLogger(opts.logConfig)
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	if err := run(ctx, opts, logger); err != nil {
		fmt.Fprintf(os.Stderr, "bootimage-operator: %v\n", err)
		os.Exit(1)
	}
}

// parseFlags reads the command line.
func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("bootimage-operator", flag.ContinueOnError)
	var opts options
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "Path to a kubeconfig. Default: $KUBECONFIG, else the in-cluster config.")
	fs.StringVar(&opts.releaseVersion, "release-version", kube.DefaultReleaseVersion(), "Release version whose feature gates apply. Default: $RELEASE_VERSION, else ClusterVersion/version status.desired.version.")
	fs.BoolVar(&opts.leaderElect, "leader-elect", true, "Hold a Lease in "+leaseNS+" so only one replica acts.")
	fs.StringVar(&opts.metricsAddr, "metrics-bind-address", ":8443", "Address of the Prometheus metrics endpoint (HTTPS; a bearer token allowed to get /metrics is required); \"0\" turns it off.")
	fs.StringVar(&opts.metricsCertDir, "metrics-cert-dir", "", "Folder holding tls.crt and tls.key of the metrics endpoint, reloaded when they change. Default: a self-signed certificate made at startup.")
	fs.StringVar(&opts.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; \"0\" turns them off.")
	fs.Float64Var(&opts.kubeAPIQPS, "kube-api-qps", defaultKubeAPIQPS, "Requests per second the operator's API client may send.")
	fs.IntVar(&opts.kubeAPIBurst, "kube-api-burst", defaultKubeAPIBurst, "Requests the operator's API client may send in a burst.")
	fs.StringVar(&opts.clusterOperator, "cluster-operator-name", "", "ClusterOperator whose Upgradeable condition carries the boot image skew guard; empty (inside the MCO, whose status sync reads the guard) sets none.")
	fs.StringVar(&opts.ovaCacheDir, "ova-cache-dir", vsphereimport.DefaultOVACacheDir, "Writable directory for downloaded vSphere OVAs.")
	fs.BoolVar(&opts.showVersion, "version", false, "Print the version and exit.")
	opts.logConfig = textlogger.NewConfig()
	opts.logConfig.AddFlags(fs)
	describeLogFlags(fs)
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return opts, nil
}

// run builds a manager the way any embedder would and runs the operator in it until ctx ends.
// It sets no process-wide state: logs go to logger.
func run(ctx context.Context, opts options, logger logr.Logger) error {
	if err := checkMetricsCertDir(opts.metricsCertDir); err != nil {
		return err
	}
	log := logger.WithName("setup")

	restConfig, err := loadRESTConfig(opts.kubeconfig)
	if err != nil {
		return err
	}
	restConfig.QPS, restConfig.Burst = float32(opts.kubeAPIQPS), opts.kubeAPIBurst
	tuning := readClusterTuning(ctx, restConfig, log)
	log.Info("Read cluster tuning", "leaseDuration", tuning.Lease.LeaseDuration.String(), "renewDeadline", tuning.Lease.RenewDeadline.String(),
		"retryPeriod", tuning.Lease.RetryPeriod.String(), "metricsTLSProfile", tuning.TLSProfile)
	mgrOpts := controllers.ManagerOptions()
	mgrOpts.Logger = quietOnStop(ctx, logger)
	mgrOpts.Metrics = metricsOptions(opts.metricsAddr, opts.metricsCertDir, tuning)
	mgrOpts.HealthProbeBindAddress = opts.probeAddr
	mgrOpts.LeaderElection = opts.leaderElect
	mgrOpts.LeaderElectionID = leaseName
	mgrOpts.LeaderElectionNamespace = leaseNS
	mgrOpts.LeaderElectionReleaseOnCancel = true
	mgrOpts.LeaseDuration = ptr(tuning.Lease.LeaseDuration)
	mgrOpts.RenewDeadline = ptr(tuning.Lease.RenewDeadline)
	mgrOpts.RetryPeriod = ptr(tuning.Lease.RetryPeriod)
	mgrOpts.GracefulShutdownTimeout = ptr(shutdownGrace)
	// Every write of the manager's client is fenced on the lease's last renewal.
	fence, err := leader.Configure(restConfig, &mgrOpts, leader.DefaultSkewMargin)
	if err != nil {
		return fmt.Errorf("fencing writes on the leader lease: %w", err)
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	for name, check := range leader.Readiness(mgr.GetCache(), fence) {
		if err := mgr.AddReadyzCheck(name, check); err != nil {
			return err
		}
	}
	if err := controllers.AddToManager(mgr, controllers.Options{
		Logger:          logger,
		ReleaseVersion:  opts.releaseVersion,
		ClusterOperator: opts.clusterOperator,
		OVACacheDir:     opts.ovaCacheDir,
		GCP:             gcpcloud.New,
	}); err != nil {
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
	log.Info("Starting manager", "version", buildinfo.Read().String(), "releaseVersion", opts.releaseVersion, "leaderElect", opts.leaderElect, "host", restConfig.Host)
	if err := leader.Start(ctx, mgr, fence); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	log.Info("Manager stopped")
	return nil
}

// checkMetricsCertDir fails when certDir lacks the certificate or key: controller-runtime would
// silently fall back to a self-signed certificate, which Prometheus would then refuse.
func checkMetricsCertDir(certDir string) error {
	if certDir == "" {
		return nil
	}
	for _, name := range []string{metricsCertName, metricsKeyName} {
		if _, err := os.Stat(filepath.Join(certDir, name)); err != nil {
			return fmt.Errorf("--metrics-cert-dir: %w", err)
		}
	}
	return nil
}

// metricsOptions serves metrics over HTTPS to callers whose token the API server accepts and who
// may get /metrics (SubjectAccessReview), as OpenShift's platform Prometheus scrapes, with the
// cluster's TLS profile.
func metricsOptions(addr, certDir string, tuning clusterTuning) metricsserver.Options {
	return metricsserver.Options{
		BindAddress:    addr,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		CertDir:        certDir,
		CertName:       metricsCertName,
		KeyName:        metricsKeyName,
		// HTTP/2 stays off: its stream handling had denial-of-service flaws (CVE-2023-44487,
		// CVE-2023-39325) and a scrape gains nothing from it.
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.NextProtos = []string{"http/1.1"}
			c.MinVersion, c.CipherSuites = tuning.TLSMinVersion, tuning.TLSCipherSuites
		}},
	}
}

// File names in --metrics-cert-dir: those of a kubernetes.io/tls Secret, as the service CA
// operator writes for service.beta.openshift.io/serving-cert-secret-name.
const (
	metricsCertName = "tls.crt"
	metricsKeyName  = "tls.key"
)

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
