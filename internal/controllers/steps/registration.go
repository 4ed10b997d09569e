package steps

import (
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/bootimage-operator/bootimage-operator/internal/crdgate"
)

// reconcileTimeout bounds every reconcile of every controller: one that waits on a cache that
// never syncs (a conversion webhook down, a rule revoked) gives up and is retried, rather than
// holding its worker, and with it every later pass of that controller, for ever. A reconcile
// makes a few cache reads, cloud lookups (each bounded at a minute, and shared) and writes.
const reconcileTimeout = 2 * time.Minute

// Registration is how one Add names its controllers and where they log.
type Registration struct {
	// Prefix, when set, prefixes the controller names.
	Prefix string
	Logger logr.Logger
}

// Controller starts the builder of controller name, whose requests are objects of kind (empty
// for a singleton), logging as controller-runtime's builder does but to the registration's logger.
func (r Registration) Controller(mgr ctrl.Manager, name, kind string, opts controller.Options) *builder.Builder {
	if r.Prefix != "" {
		name = r.Prefix + "-" + name
	}
	logger := r.Logger
	if logger.GetSink() == nil {
		logger = mgr.GetLogger()
	}
	logger = logger.WithValues("controller", name)
	opts.LogConstructor = func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return logger
		}
		l := logger
		if kind != "" {
			l = l.WithValues(kind, klog.KRef(req.Namespace, req.Name))
		}
		return l.WithValues("namespace", req.Namespace, "name", req.Name)
	}
	if crdgate.Gated(mgr) {
		// A gate sets a controller up again each time it starts it.
		opts.SkipNameValidation = ptr.To(true)
	}
	if opts.ReconciliationTimeout == 0 {
		opts.ReconciliationTimeout = reconcileTimeout
	}
	return ctrl.NewControllerManagedBy(mgr).Named(name).WithOptions(opts)
}
