# The two commands that do everything on a fresh machine (no Docker needed):
#   make run    start Kafka + PostgreSQL and the four services (Ctrl-C stops)
#   make test   start Kafka + PostgreSQL and run every test against them
.PHONY: run test infra-up infra-down vet

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
