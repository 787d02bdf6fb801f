// Command local runs the whole of Choreo in one process, on a machine with
// nothing but Go installed: an in-process Kafka-protocol broker, a
// throwaway PostgreSQL, the four services and the tracker, whose APIs take
// tokens of the development key (-dev-key-dir; choreoctl token).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"text/template"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/choreo-saga/choreo/internal/cli"
	"github.com/choreo-saga/choreo/internal/devkey"
	"github.com/choreo-saga/choreo/internal/infra"
	"github.com/choreo-saga/choreo/pkg/participant"
	"github.com/choreo-saga/choreo/pkg/web"
	"github.com/choreo-saga/choreo/services/inventory"
	"github.com/choreo-saga/choreo/services/order"
	"github.com/choreo-saga/choreo/services/payment"
	"github.com/choreo-saga/choreo/services/shipping"
	"github.com/choreo-saga/choreo/services/tracker"
)

// The services listen on their usual ports (order :8080 to shipping :8083,
// tracker :8084; see -h for the flags); once all five answer /readyz it
// prints a walkthrough, with the admin token it generated for choreoctl.
// Ctrl-C stops the services, then the broker and the database; a second
// Ctrl-C exits at once. The services log JSON to stderr, each line tagged
// service=<name>. kfake is a faithful Kafka double, not Kafka: for the real
// broker, use scripts/infra.sh (make run).
//
//	go run ./deploy/local
func main() {
	cli.Main("local", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr) })
}

// run starts the infrastructure and the services, prints the walkthrough to
// stdout once they are ready, and stops everything when ctx ends. Logs go to
// stderr; getenv supplies LOG_LEVEL when -log-level is not given, and the
// development key's directory when -dev-key-dir is not.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	flags := flag.NewFlagSet("local", flag.ContinueOnError)
	flags.SetOutput(stderr)
	orderCfg, paymentCfg := order.DefaultConfig(), payment.DefaultConfig()
	inventoryCfg, shippingCfg := inventory.DefaultConfig(), shipping.DefaultConfig()
	trackerCfg := tracker.DefaultConfig()
	var (
		kafkaAddr     = flags.String("kafka-addr", "127.0.0.1:9092", "`host:port` of the embedded Kafka broker; port 0 picks a free one")
		pgPort        = flags.Int("pg-port", 0, "PostgreSQL's `port` on 127.0.0.1; 0 picks a free one")
		dataDir       = flags.String("data-dir", "", "keep Kafka's and PostgreSQL's data in `dir` between runs (default: a temporary directory)")
		orderAddr     = flags.String("order-addr", onThisMachine(orderCfg.HTTPAddr), "order service's HTTP `address`")
		paymentAddr   = flags.String("payment-addr", onThisMachine(paymentCfg.HTTPAddr), "payment service's HTTP `address`")
		inventoryAddr = flags.String("inventory-addr", onThisMachine(inventoryCfg.HTTPAddr), "inventory service's HTTP `address`")
		shippingAddr  = flags.String("shipping-addr", onThisMachine(shippingCfg.HTTPAddr), "shipping service's HTTP `address`")
		trackerAddr   = flags.String("tracker-addr", onThisMachine(trackerCfg.HTTPAddr), "saga tracker's HTTP `address`")
		sagaSLA       = flags.Duration("saga-sla", trackerCfg.SagaSLA, "how long a saga may run before the tracker calls it stuck (`duration`)")
		countries     = flags.String("shipping-countries", shippingCfg.ServedCountries, "comma-separated `codes` of the countries shipping serves")
		levelFlag     = flags.String("log-level", "", "log `level`: debug, info, warn or error (default: $LOG_LEVEL, else info)")
		controlAddr   = flags.String("control-addr", defaultControlAddr, "`address` of the launcher's own API that stops and starts a service; empty: none")
		keyDir        = flags.String("dev-key-dir", "", "`dir` of the development token key pair, made on first use, which choreoctl token signs with (default: $CHOREO_DEV_KEY_DIR, else ~/.cache/choreo/dev-key)")
		kafkaAdmin    = flags.String("kafka-admin-file", "", "`file` the embedded broker's administrator password is written to, for the tools (default: $CHOREO_KAFKA_ADMIN_FILE, else ~/.cache/choreo/kafka-admin-password)")
	)
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	level, err := logLevel(*levelFlag, getenv("LOG_LEVEL"))
	if err != nil {
		return err
	}
	log := participant.NewLogger(stderr, level)
	start := time.Now()

	// The key the services verify tokens with, the development one: who
	// can read its private half (its owner) can sign any caller's token.
	if *keyDir == "" {
		if *keyDir, err = devkey.Dir(getenv); err != nil {
			return err
		}
	}
	key, err := devkey.Open(*keyDir)
	if err != nil {
		return err
	}
	if *kafkaAdmin == "" {
		if *kafkaAdmin, err = cli.LocalAdminFile(getenv); err != nil {
			return err
		}
	}

	// The infrastructure.
	inf, err := infra.Embedded(ctx, infra.EmbeddedOptions{
		DataDir:   *dataDir,
		KafkaAddr: *kafkaAddr,
		PGPort:    *pgPort,
		Logger:    log,
	})
	if err != nil {
		return err
	}
	defer func() {
		// Last: the services are gone by now.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		err = errors.Join(err, inf.Stop(stopCtx))
	}()
	// The tools (redeliver, choreoctl kafka-acls, …) log in as the
	// administrator from this file when the environment names no user.
	if err := cli.WriteLocalAdmin(*kafkaAdmin, inf.Kafka.Password); err != nil {
		return err
	}

	// The services, each with its own database, all on the one broker,
	// each as its own Kafka user (internal/kafkaacl). Each tags its log
	// lines with service=<name>.
	g, gctx := errgroup.WithContext(ctx)
	for _, c := range []struct {
		name string
		cfg  *participant.Config
		addr string
	}{
		{order.Name, &orderCfg.Config, *orderAddr},
		{payment.Name, &paymentCfg.Config, *paymentAddr},
		{inventory.Name, &inventoryCfg.Config, *inventoryAddr},
		{shipping.Name, &shippingCfg.Config, *shippingAddr},
		{tracker.Name, &trackerCfg.Config, *trackerAddr},
	} {
		c.cfg.HTTPAddr, c.cfg.DatabaseURL, c.cfg.Kafka, c.cfg.Logger = c.addr, inf.DatabaseURLs[c.name], inf.User(c.name), log
		c.cfg.Auth = key.Auth()
	}
	shippingCfg.ServedCountries = *countries
	trackerCfg.SagaSLA = *sagaSLA
	services := []*service{
		newService(order.Name, baseURL(*orderAddr), func(ctx context.Context) error { return order.Run(ctx, orderCfg) }),
		newService(payment.Name, baseURL(*paymentAddr), func(ctx context.Context) error { return payment.Run(ctx, paymentCfg) }),
		newService(inventory.Name, baseURL(*inventoryAddr), func(ctx context.Context) error { return inventory.Run(ctx, inventoryCfg) }),
		newService(shipping.Name, baseURL(*shippingAddr), func(ctx context.Context) error { return shipping.Run(ctx, shippingCfg) }),
		newService(tracker.Name, baseURL(*trackerAddr), func(ctx context.Context) error { return tracker.Run(ctx, trackerCfg) }),
	}
	for _, s := range services {
		g.Go(func() error { return s.loop(gctx) })
	}
	if *controlAddr != "" {
		g.Go(func() error {
			return web.Serve(gctx, *controlAddr, controlRoutes(gctx, services, log), log.With("component", "control"))
		})
	}

	urls := walkthrough{
		Order:     baseURL(*orderAddr),
		Payment:   baseURL(*paymentAddr),
		Inventory: baseURL(*inventoryAddr),
		Shipping:  baseURL(*shippingAddr),
		Tracker:   baseURL(*trackerAddr),
		Kafka:     strings.Join(inf.Brokers(), ","),
		Postgres:  inf.DatabaseURLs["order"],
		KeyDir:    *keyDir,
	}
	if *controlAddr != "" {
		urls.Control = baseURL(*controlAddr)
	}
	if err := waitReady(gctx, 2*time.Minute, urls.Order, urls.Payment, urls.Inventory, urls.Shipping, urls.Tracker); err != nil {
		// A service that failed to start ended gctx; its error says why.
		if werr := g.Wait(); werr != nil {
			return werr
		}
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		return err
	}
	urls.Took = time.Since(start).Round(100 * time.Millisecond)
	tw := tabwriter.NewWriter(stdout, 0, 8, 1, ' ', 0)
	if err := walkthroughText.Execute(tw, urls); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	err = g.Wait()
	log.Info("services stopped; stopping the infrastructure", "err", err)
	return err
}

// defaultControlAddr is where the control endpoint listens unless told:
// loopback only, as it can stop a service.
const defaultControlAddr = "127.0.0.1:8089"

// logLevel is the -log-level flag's level, else LOG_LEVEL's, else INFO,
// parsed as the services parse LOG_LEVEL.
func logLevel(flag, env string) (slog.Level, error) {
	var level slog.Level
	if l := cmp.Or(flag, env); l != "" {
		if err := level.UnmarshalText([]byte(l)); err != nil {
			return level, fmt.Errorf("log level: %w", err)
		}
	}
	return level, nil
}

// serviceErr names the service in err, and drops the cancellation a
// shutdown causes.
func serviceErr(name string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

// onThisMachine binds a service's default address (":8080", right in a
// container) to the loopback interface: a quick start is for this machine.
func onThisMachine(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// baseURL turns a listen address such as ":8080" into the URL a client on
// this machine uses: http://localhost:8080.
func baseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// waitReady polls each base URL's /readyz until it answers 200, ctx ends or
// timeout passes.
func waitReady(ctx context.Context, timeout time.Duration, bases ...string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 3 * time.Second}
	for _, base := range bases {
		for {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s/readyz did not answer 200: %w", base, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

// walkthrough is what walkthroughText shows.
type walkthrough struct {
	Order, Payment, Inventory, Shipping, Tracker string
	Control                                      string // "" without a control endpoint
	Kafka, Postgres                              string
	KeyDir                                       string // the development key pair's
	Took                                         time.Duration
}

// walkthroughText is printed once the services are ready, through a
// tabwriter: the tab before each "#" lines the comments up. The order id is
// picked out of the response with sed, so the commands run as they are in
// any POSIX shell.
var walkthroughText = template.Must(template.New("walkthrough").Parse(`
Choreo is running, ready in {{.Took}} (embedded Kafka and PostgreSQL)

  order      {{.Order}}
  payment    {{.Payment}}
  inventory  {{.Inventory}}
  shipping   {{.Shipping}}
  tracker    {{.Tracker}}  (open it in a browser: every saga's timeline)
{{- if .Control}}
  control    {{.Control}}  (POST /services/shipping/stop, later .../start: stop a service for a while)
{{- end}}
  kafka      {{.Kafka}}
  postgres   {{.Postgres}}  (and payment_db, inventory_db, shipping_db, tracker_db)
  tokens     signed with the development key in {{.KeyDir}}:
             export CHOREO_DEV_KEY_DIR={{.KeyDir}}
             OPERATOR=$(go run ./cmd/choreoctl token -sub ops -operator); TOKEN=$(go run ./cmd/choreoctl token -sub c-1)

Happy path: the customer pays, the stock is reserved, the shipment scheduled.

  curl -s -X PUT {{.Payment}}/accounts/c-1 -H "Authorization: Bearer $OPERATOR" -H 'Content-Type: application/json' -d '{"balance":10000}'
  curl -s -X PUT {{.Inventory}}/stock/SKU-1 -H "Authorization: Bearer $OPERATOR" -H 'Content-Type: application/json' -d '{"available":10}'
  ID=$(curl -s -X POST {{.Order}}/orders -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"JP","postal_code":"100-0001","line1":"1-1 Chiyoda"}}' \
    | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'); echo "$ID"
  curl -s {{.Order}}/orders/$ID -H "Authorization: Bearer $TOKEN"	# "status":"COMPLETED"
  curl -s {{.Payment}}/accounts/c-1 -H "Authorization: Bearer $TOKEN"	# "balance":5000
  curl -s {{.Inventory}}/stock/SKU-1 -H "Authorization: Bearer $OPERATOR"	# "available":8, "reserved":2
  curl -s {{.Tracker}}/sagas/$ID -H "Authorization: Bearer $OPERATOR"	# "state":"completed", the saga's events in time order

Compensated: shipping does not serve Brazil, so inventory releases the items
and payment refunds the charge.

  ID=$(curl -s -X POST {{.Order}}/orders -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"items":[{"sku":"SKU-1","quantity":2,"unit_price":2500}],"currency":"JPY","shipping_address":{"country":"BR","postal_code":"01000-000","line1":"Av. Paulista 1"}}' \
    | sed -n 's/.*"id":"\([^"]*\)".*/\1/p'); echo "$ID"
  curl -s {{.Order}}/orders/$ID -H "Authorization: Bearer $TOKEN"	# "status":"CANCELLED", "cancel_reason":"shipping_unavailable"
  curl -s {{.Shipping}}/shipments/$ID -H "Authorization: Bearer $OPERATOR"	# "status":"FAILED"
  curl -s {{.Inventory}}/reservations/$ID -H "Authorization: Bearer $OPERATOR"	# "status":"RELEASED"
  curl -s {{.Payment}}/payments/$ID -H "Authorization: Bearer $OPERATOR"	# "status":"REFUNDED"
  curl -s {{.Payment}}/accounts/c-1 -H "Authorization: Bearer $TOKEN"	# "balance":5000 again
  curl -s {{.Tracker}}/sagas/$ID -H "Authorization: Bearer $OPERATOR"	# "state":"cancelled"; the page at {{.Tracker}}/?order=$ID#token=$OPERATOR draws it

Ctrl-C stops everything.
`))
