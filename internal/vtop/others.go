package vtop

import (
	"errors"
	"fmt"
)

func newARM64(cfg Config) (*translator, error) {
	return nil, fmt.Errorf("vtop: arm64: %w", errors.ErrUnsupported)
}

func newI386(cfg Config) (*translator, error) {
	return nil, fmt.Errorf("vtop: i386: %w", errors.ErrUnsupported)
}

func newS390X(cfg Config) (*translator, error) {
	return nil, fmt.Errorf("vtop: s390x: %w", errors.ErrUnsupported)
}
