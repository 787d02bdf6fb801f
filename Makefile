# The two commands that do everything on a fresh machine (no Docker needed):
#   make run    start Kafka + PostgreSQL, the four services and the tracker (Ctrl-C stops)
#   make test   start Kafka + PostgreSQL and run every test against them
.PHONY: run test infra-up infra-down vet up down logs local

# The Docker Compose stack (deploy/compose/compose.yaml): Kafka, one
# PostgreSQL per service and the four services built from deploy/Dockerfile.
# compose.yaml requires CHOREO_PUBLIC_KEY_FILE, the public key the services
# verify bearer tokens with: unless it is set, the development key's, made
# once by `choreoctl dev-key` outside the repository, whose private half
# `choreoctl token` signs with.
# OUTBOX_RELAY=debezium adds the debezium profile: Debezium on a Kafka
# Connect worker publishes the outboxes (deploy/compose/README.md).
COMPOSE = CHOREO_PUBLIC_KEY_FILE="$${CHOREO_PUBLIC_KEY_FILE:-$$(go run ./cmd/choreoctl dev-key | sed -n 's/^AUTH_PUBLIC_KEY_FILE=//p')}" docker compose -f deploy/compose/compose.yaml $(if $(filter debezium,$(OUTBOX_RELAY)),--profile debezium)

run:
	bash scripts/run.sh

test:
	bash scripts/test.sh

infra-up:
	bash scripts/infra.sh up

infra-down:
	bash scripts/infra.sh down

vet:
	go vet ./...

# up builds the images and starts the stack in the background; down stops it
# and keeps the data volumes (docker compose -f deploy/compose/compose.yaml
# down -v removes them too); logs follows every container's output.
up:
	$(COMPOSE) up --build -d

down:
	$(COMPOSE) down

logs:
	$(COMPOSE) logs -f

# local runs the whole system in one process (deploy/local).
local:
	go run ./deploy/local
