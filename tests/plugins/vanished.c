/* A dependency that the missing_dep test plugin links against and that is deliberately
 * not on the loader's path, so loading the plugin fails at stage "open". */
int sy_test_vanished_function(void) {
  return 0;
}
