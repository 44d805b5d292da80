// This file is empty on purpose: with an assembly file in the package the
// compiler accepts Of without a body (see cronspec.go).
