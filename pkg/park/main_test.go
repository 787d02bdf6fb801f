package park_test

import (
	"os"
	"testing"

	"github.com/choreo-saga/choreo/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
