package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/klog/v2/textlogger"
)

var _ = Describe("The operator's own output", func() {
	It("logs the Lease released on a normal shutdown as Info, and a real leader loss as an Error", func() {
		var lines []string
		base := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		log := quietOnStop(ctx, base).WithName("manager").WithValues("k", "v")

		log.Error(errors.New(leaderLossOnStop), "error received after stop sequence was engaged")
		Expect(lines).To(HaveLen(1))
		Expect(lines[0]).To(ContainSubstring(`"error"="leader election lost"`), "before a stop the loss is an Error")

		cancel()
		log.Error(errors.New(leaderLossOnStop), "error received after stop sequence was engaged")
		log.Error(errors.New("boom"), "Something else")
		Expect(lines).To(HaveLen(3))
		Expect(lines[1]).To(And(ContainSubstring(`"msg"="Released the leader lease on shutdown"`), ContainSubstring(`"k"="v"`), Not(ContainSubstring("error"))))
		Expect(lines[2]).To(ContainSubstring(`"error"="boom"`))
	})

	It("describes -v and -vmodule without speaking of a testing logger", func() {
		fs := flag.NewFlagSet("bootimage-operator", flag.ContinueOnError)
		textlogger.NewConfig().AddFlags(fs)
		describeLogFlags(fs)
		var help bytes.Buffer
		fs.SetOutput(&help)
		fs.PrintDefaults()
		Expect(help.String()).To(ContainSubstring("Log verbosity: 0 logs updates"))
		Expect(strings.ToLower(help.String())).NotTo(ContainSubstring("testing"))
	})

	It("gives a -vmodule example that names a file logging at that level", func() {
		Expect(vmoduleUsage).To(ContainSubstring("report=1"))
		src, err := os.ReadFile(filepath.Join("..", "..", "internal", "controllers", "steps", "report.go"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(src)).To(ContainSubstring(".V(1).Info("))
	})

	It("takes --version, which main answers before it starts anything", func() {
		opts, err := parseFlags([]string{"--version", "--kubeconfig", "/nonexistent"})
		Expect(err).NotTo(HaveOccurred())
		Expect(opts.showVersion).To(BeTrue())
	})
})
