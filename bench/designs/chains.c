/* (c) Several chains per slot, walked a node from each in turn: the list
 * design of list.c with CHAINS chains per slot instead of one, to get
 * several independent misses in flight during a walk. */
#define CHAINS 8
#define DESIGN "chains8"
#include "list.c"
