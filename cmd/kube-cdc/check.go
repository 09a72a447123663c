package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"
	authv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-cdc/kube-cdc/internal/config"
	"github.com/kube-cdc/kube-cdc/internal/source"
)

func newCheckCmd() *cobra.Command {
	var offline *bool
	cmd := configCommand("check", "Check the config, the apiserver, RBAC for every resource and every sink, as a table",
		func(cmd *cobra.Command, cfg *config.Config) error {
			t := &table{w: tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)}
			t.row("config", "ok", fmt.Sprintf("%d resources, %d sinks", len(cfg.Resources), len(cfg.Sinks)))
			if !*offline {
				check(cmd.Context(), cfg, t)
			}
			t.w.Flush()
			if t.failed > 0 {
				return fmt.Errorf("check: %d of %d checks failed", t.failed, t.rows)
			}
			return nil
		})
	offline = cmd.Flags().Bool("offline", false, "only validate the config; connect to nothing")
	return cmd
}

type table struct {
	w            *tabwriter.Writer
	rows, failed int
}

func (t *table) row(what, status, detail string) {
	if t.rows == 0 {
		fmt.Fprintln(t.w, "CHECK\tSTATUS\tDETAIL")
	}
	t.rows++
	fmt.Fprintf(t.w, "%s\t%s\t%s\n", what, status, detail)
}

func (t *table) result(what string, err error, ok string) {
	if err != nil {
		t.failed++
		t.row(what, "FAIL", err.Error())
		return
	}
	t.row(what, "ok", ok)
}

func check(ctx context.Context, cfg *config.Config, t *table) {
	src, err := connectSource(cfg)
	if err != nil {
		t.result("apiserver", err, "")
		return
	}
	v, err := src.clients.Discovery.ServerVersion()
	if err != nil {
		t.result("apiserver", fmt.Errorf("%s: %w", src.rest.Host, err), "")
		return
	}
	t.result("apiserver", nil, src.rest.Host+" "+v.GitVersion)

	targets, err := source.Resolve(src.clients.Discovery, sourceSpecs(cfg))
	if err != nil {
		t.result("resources", err, "")
	} else if cs, err := kubernetes.NewForConfig(src.rest); err != nil {
		t.result("rbac", err, "")
	} else {
		for _, tg := range targets {
			t.result("resource "+tg.Resource.ID(), canListWatch(ctx, cs, tg), "list, watch allowed ("+tg.Resource.Group+"/"+tg.Resource.Version+")")
		}
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, sc := range cfg.Sinks {
		detail := sc.Type + " reachable"
		migrate := false
		if sc.Type == config.SinkPostgres {
			o := *sc.Postgres
			migrate, o.Migrate = o.Migrate, false // check changes nothing
			sc.Postgres = &o
		}
		s, err := openSink(ctx, cfg, sc, quiet)
		if err == nil {
			err = s.Close()
		}
		var pgErr *pgconn.PgError
		if migrate && errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
			err, detail = nil, "postgres reachable; its schema will be created at start (migrate: true)"
		}
		t.result("sink "+sc.Name, err, detail)
	}
}

// canListWatch asks the apiserver (SelfSubjectAccessReview) whether the current user may
// list and watch the target.
func canListWatch(ctx context.Context, cs kubernetes.Interface, tg source.Target) error {
	ns := ""
	if len(tg.Namespaces) == 1 {
		ns = tg.Namespaces[0]
	}
	for _, verb := range []string{"list", "watch"} {
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{
			Spec: authv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authv1.ResourceAttributes{
				Verb: verb, Group: tg.Resource.Group, Resource: tg.Resource.Resource, Namespace: ns,
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("access review: %w", err)
		}
		if !r.Status.Allowed {
			return fmt.Errorf("%s %s not allowed: %s", verb, tg.Resource.ID(), r.Status.Reason)
		}
	}
	return nil
}
