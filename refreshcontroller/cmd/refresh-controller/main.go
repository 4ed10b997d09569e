// Command refresh-controller runs the reference config refresh controller against a management
// cluster (the NodePools of one hosted control plane namespace) and a guest cluster. With
// --simulate-daemon it also plays the machine-config-daemon of every guest node (daemonsim), so
// it can be tried on clusters without real nodes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/bootimage-operator/bootimage-operator/refresh/hypershift"
	controller "github.com/bootimage-operator/bootimage-operator/refreshcontroller"
	"github.com/bootimage-operator/bootimage-operator/refreshcontroller/daemonsim"
)

func main() {
	var o options
	flag.StringVar(&o.managementKubeconfig, "management-kubeconfig", "", "kubeconfig of the management cluster (required)")
	flag.StringVar(&o.namespace, "namespace", "", "hosted control plane namespace of the NodePools on the management cluster (required)")
	flag.StringVar(&o.guestKubeconfig, "guest-kubeconfig", "", "kubeconfig of the guest cluster (required)")
	flag.StringVar(&o.daemonImage, "daemon-image", "quay.io/openshift/origin-machine-config-operator:latest", "machine-config-daemon image of the daemon pods")
	flag.BoolVar(&o.simulateDaemon, "simulate-daemon", false, "play the machine-config-daemon of every guest node (daemonsim) instead of running real ones")
	flag.StringVar(&o.daemonRoot, "daemon-root", "", "with --simulate-daemon: folder holding each node's / (default: a new temporary folder)")
	flag.StringVar(&o.metricsAddress, "metrics-bind-address", "0", "metrics address; 0 turns metrics off")
	flag.DurationVar(&o.daemonTimeout, "daemon-timeout", controller.DefaultDaemonTimeout, "how long a daemon pod may run without a result before its node is Degraded")
	flag.DurationVar(&o.clockSkew, "clock-skew", controller.DefaultClockSkew, "how far this clock may run behind the management API server's: a node joins with the target payload only if its Machine was created this long after the payload was seen")
	flag.Parse()
	logger := funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{})
	ctrl.SetLogger(logger)
	if err := run(ctrl.SetupSignalHandler(), o, logger); err != nil {
		logger.Error(err, "Refresh controller failed")
		os.Exit(1)
	}
}

type options struct {
	managementKubeconfig, namespace, guestKubeconfig, daemonImage, daemonRoot, metricsAddress string
	simulateDaemon                                                                            bool
	daemonTimeout, clockSkew                                                                  time.Duration
}

func run(ctx context.Context, o options, logger logr.Logger) error {
	if o.managementKubeconfig == "" || o.namespace == "" || o.guestKubeconfig == "" {
		return errors.New("--management-kubeconfig, --namespace and --guest-kubeconfig are required")
	}
	mcfg, err := clientcmd.BuildConfigFromFlags("", o.managementKubeconfig)
	if err != nil {
		return fmt.Errorf("reading the management kubeconfig: %w", err)
	}
	gcfg, err := clientcmd.BuildConfigFromFlags("", o.guestKubeconfig)
	if err != nil {
		return fmt.Errorf("reading the guest kubeconfig: %w", err)
	}
	// As in the HCCO: the manager is the guest cluster's, and the management side is a cluster
	// added to it, read in the hosted control plane namespace only.
	mgr, err := ctrl.NewManager(gcfg, ctrl.Options{Scheme: scheme.Scheme, Logger: logger, Metrics: metricsserver.Options{BindAddress: o.metricsAddress}})
	if err != nil {
		return err
	}
	management, err := cluster.New(mcfg, func(co *cluster.Options) {
		co.Scheme = scheme.Scheme
		co.Logger = logger
		co.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.namespace: {}}}
	})
	if err != nil {
		return err
	}
	if err := mgr.Add(management); err != nil {
		return err
	}
	// The plan reads the guest uncached: it must see its own writes, or a stale cache starts
	// more nodes than maxUnavailable.
	guestDirect, err := client.New(gcfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	r := &controller.Reconciler{Management: management.GetClient(), Namespace: o.namespace, Guest: guestDirect, DaemonImage: o.daemonImage, DaemonTimeout: o.daemonTimeout,
		ClockSkew: o.clockSkew}
	if err := r.SetupWithManager(mgr, management, mgr); err != nil {
		return err
	}
	if o.simulateDaemon {
		root := o.daemonRoot
		if root == "" {
			if root, err = os.MkdirTemp("", "refresh-controller-nodes-"); err != nil {
				return err
			}
		}
		d := &daemonsim.Daemon{Client: mgr.GetClient(), Root: root}
		mclient, err := client.New(mcfg, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			return err
		}
		if err := seed(ctx, d, mclient, guestDirect, o.namespace, logger); err != nil {
			return err
		}
		if err := d.SetupWithManager(mgr); err != nil {
			return err
		}
		logger.Info("Simulating the daemon of every guest node", "root", root)
	}
	logger.Info("Starting the refresh controller", "namespace", o.namespace)
	return mgr.Start(ctx)
}

// seed gives each simulated node that has no current config yet the payload of its NodePool's
// rollout target, as the node's first boot would have written it.
func seed(ctx context.Context, d *daemonsim.Daemon, management, guest client.Client, namespace string, logger logr.Logger) error {
	pools := &unstructured.UnstructuredList{}
	pools.SetGroupVersionKind(controller.NodePoolGVK.GroupVersion().WithKind("NodePoolList"))
	if err := management.List(ctx, pools, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing NodePools: %w", err)
	}
	for _, np := range pools.Items {
		rollout := np.GetAnnotations()[controller.NodePoolCurrentConfigAnnotation]
		if rollout == "" {
			continue
		}
		token := &corev1.Secret{}
		if err := management.Get(ctx, client.ObjectKey{Namespace: namespace, Name: controller.TokenSecretName(np.GetName(), rollout)}, token); err != nil {
			return fmt.Errorf("reading the token Secret of NodePool %s: %w", np.GetName(), err)
		}
		payload, err := hypershift.DecodePayload(string(token.Data[hypershift.TokenSecretPayloadKey]))
		if err != nil {
			return fmt.Errorf("token Secret %s: %w", token.Name, err)
		}
		nodes := &corev1.NodeList{}
		if err := guest.List(ctx, nodes, client.MatchingLabels{controller.NodePoolLabel: np.GetName()}); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if _, err := os.Stat(filepath.Join(d.Root, n.Name, daemonsim.CurrentConfigFile)); err == nil {
				continue
			}
			if err := d.Seed(n.Name, payload); err != nil {
				return err
			}
			logger.Info("Seeded a simulated node", "node", n.Name, "nodePool", np.GetName(), "rolloutTarget", rollout)
		}
	}
	return nil
}
