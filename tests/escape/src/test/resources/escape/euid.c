/* Prints its real and effective uid: installed setuid-root, it shows whether exec granted privileges. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    printf("%d %d\n", (int)getuid(), (int)geteuid());
    return 0;
}
