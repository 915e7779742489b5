// Built only by the boundary_check test, which expects this to fail: a front end links the
// engine and sees include/grag/ alone, so the store's header is not on its include path.
#include "grag/store.h"

int main() { return 0; }
