package server

import "os"

var stderr = os.Stderr
