package controllers_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mccImports are the imports of the MCC's cmd/machine-config-controller/start.go at 7ff337a4
// that are in this module's graph, bootimagecontroller gone (docs/inside-the-mco.md, step 1).
var mccImports = []string{
	`"context"`, `"flag"`, `"fmt"`, `"os"`, `"path"`, `"time"`,
	`"github.com/spf13/cobra"`, `metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"`,
	`"k8s.io/client-go/tools/leaderelection"`, `"k8s.io/klog/v2"`,
}

// standInImports are what the stand-in's types need, under names no MCC file uses.
var standInImports = []string{`mccconfigv1 "github.com/openshift/api/config/v1"`, `mccrest "k8s.io/client-go/rest"`}

// mccPackage stands in for the rest of the MCC's package main at 7ff337a4: start.go's imports of
// MCO packages (as variables of the same names, holding what run uses of them) and every
// package-level name of main.go, start.go, bootstrap.go and version.go. A name of the example that
// clashes with one of them fails to compile here as it would in the MCC.
const mccPackage = `
// The MCO's packages that start.go imports.
var (
	common                 struct{ SignalHandler func(context.CancelFunc) }
	clients                struct{ NewBuilder func(string) (*builder, error) }
	certrotationcontroller struct{ New func() (runner, error) }
	ctrlcommon             struct {
		CreateControllerContext func(context.Context, *builder) *controllerContext
		WriteTerminationError   func(error)
	}
	containerruntimeconfig, internalreleaseimage, kubeletconfig, node, osistreamctrl, render, template, imageutils, osimagestream struct{}
	drain                  struct{ New func() runner }
	pinnedimageset         struct{ New func(*cacheWarmerT) runner }
	version                struct{ ReleaseVersion string }
)

// The package's own names.
const componentName = "machine-config-controller"

var (
	rootCmd, startCmd, bootstrapCmd, versionCmd *cobra.Command
	rootOpts                                    struct{ templates string }
	startOpts                                   struct{ kubeconfig, streamsCache string }
	bootstrapOpts                               struct{ manifestsDir string }
)

func main()                                    {}
func runbootstrapCmd(_ *cobra.Command, _ []string) {}
func runVersionCmd(_ *cobra.Command, _ []string)   {}

type builder struct{}

// GetBuilderConfig is the MCC's copy of its REST config.
func (*builder) GetBuilderConfig() *mccrest.Config { return &mccrest.Config{} }

// featureGatesHandler is ctrlcommon.FeatureGatesHandler's method set.
type featureGatesHandler interface {
	Connect(context.Context) error
	Enabled(mccconfigv1.FeatureGateName) bool
	Exists(mccconfigv1.FeatureGateName) bool
	KnownFeatures() []mccconfigv1.FeatureGateName
}

type controllerContext struct {
	ClientBuilder       *builder
	FeatureGatesHandler featureGatesHandler
	InformersStarted    chan struct{}
}

type runner interface{ Run(context.Context, int) }
type fileInspectionCache struct{}
type cacheWarmerT struct{}

func createControllers(*controllerContext, *fileInspectionCache, any) []runner { return nil }

var (
	_ = flag.Parse
	_ = os.Exit
	_ = path.Join
	_ = time.Second
	_ = metav1.NamespaceSystem
	_ = leaderelection.RunOrDie
)

// runStartCmd declares what run has at hand, in start.go's order; the example goes where the
// IsBootImageControllerRequired block was.
func runStartCmd(_ *cobra.Command, _ []string) {
	runContext, runCancel := context.WithCancel(context.Background())
	cb, err := clients.NewBuilder(startOpts.kubeconfig)
	if err != nil {
		ctrlcommon.WriteTerminationError(fmt.Errorf("creating clients: %w", err))
	}
	run := func(ctx context.Context) {
		go common.SignalHandler(runCancel)
		ctrlctx := ctrlcommon.CreateControllerContext(ctx, cb)
		var inspectorFactory any
		var inspectionCache *fileInspectionCache
		var cacheWarmer *cacheWarmerT
		controllers := createControllers(ctrlctx, inspectionCache, inspectorFactory)
		draincontroller := drain.New()
		certrotationcontroller, err := certrotationcontroller.New()
		if err != nil {
			klog.Fatalf("unable to start cert rotation controller: %v", err)
		}
		pinnedImageSet := pinnedimageset.New(cacheWarmer)
		go pinnedImageSet.Run(ctx, 2)
		close(ctrlctx.InformersStarted)

//EXAMPLE

		for _, c := range controllers {
			go c.Run(ctx, 2)
		}
		go draincontroller.Run(ctx, 5)
		go certrotationcontroller.Run(ctx, 1)
		<-ctx.Done()
	}
	run(runContext)
}
`

// TestEmbeddingExampleCompiles type-checks the example of docs/embedding.md as the MCC must hold
// it: its imports beside start.go's, its statements inside a run shaped like the MCC's, with the
// local controllers slice. A drifted example, or one whose names clash with the MCC's, fails here.
func TestEmbeddingExampleCompiles(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "embedding.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(doc)
	if block == nil {
		t.Fatal("docs/embedding.md has no Go example")
	}
	example := string(block[1])
	imports, body, found := strings.Cut(example, "\n)\n")
	if !found || !strings.HasPrefix(imports, "import (") {
		t.Fatalf("the example does not start with an import block:\n%s", example)
	}
	imports = strings.TrimPrefix(imports, "import (")
	// An import start.go has already is listed once; a different one of the same name clashes.
	for _, imp := range append(mccImports, standInImports...) {
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(imp) + `\s*(//.*)?$`).MatchString(imports) {
			imports += "\n\t" + imp
		}
	}
	if !strings.Contains(mccPackage, "\n//EXAMPLE\n") {
		t.Fatal("the stand-in has no place for the example")
	}
	src := "package main\n\nimport (" + imports + "\n)\n" + strings.Replace(mccPackage, "\n//EXAMPLE\n", "\n"+body+"\n", 1)
	file := filepath.Join(t.TempDir(), "start.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	vet := exec.Command("go", "vet", file)
	vet.Dir = ".."
	if out, err := vet.CombinedOutput(); err != nil {
		t.Fatalf("the example of docs/embedding.md does not compile in the MCC's run: %v\n%s\n--- as checked:\n%s", err, out, src)
	}
}
