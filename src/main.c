/*
 * main.c -- the `petrel` command: the library's command line with the
 * built-in modules (the table in modules/builtin.c is generated at build
 * time from the list of modules/ files).
 */
#include <petrel.h>

extern const petrel_module_t *const petrel__builtin_modules[];

int main(int argc, char **argv)
{
    return petrel_main(argc, argv, petrel__builtin_modules);
}
